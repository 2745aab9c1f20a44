// Must NOT compile: `idleTimeot` is not a crew field (misspelt idleTimeout).
import { defineCrew } from '../../src/index.js';

export const wrong = defineCrew({
  name: 'typo',
  idleTimeot: '5m',
  agents: [{ id: 'a', model: { provider: 'scripted', script: ['hi'] } }],
  orchestration: { mode: 'sequential', tasks: [{ description: 'do it', agent: 'a' }] },
});
