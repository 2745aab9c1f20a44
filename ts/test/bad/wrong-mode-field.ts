// Must NOT compile: a sequential orchestration has tasks, not branches.
import { defineCrew } from '../../src/index.js';

export const wrong = defineCrew({
  name: 'typo',
  agents: [{ id: 'a', model: { provider: 'scripted', script: ['hi'] } }],
  orchestration: { mode: 'sequential', branches: [{ id: 'b', agent: 'a' }] },
});
