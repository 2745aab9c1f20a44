// Must NOT compile: `sideways` is not a link direction.
import { defineCrew } from '../../src/index.js';

export const wrong = defineCrew({
  name: 'typo',
  agents: [{ id: 'a', model: { provider: 'scripted', script: ['hi'] } }],
  orchestration: { mode: 'sequential', tasks: [{ description: 'do it', agent: 'a' }] },
  links: [{ to: 'billing', direction: 'sideways' }],
});
