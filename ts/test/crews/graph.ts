import { defineCrew } from '../../src/index.js';

export const graph = defineCrew({
  name: 'pipeline',
  agents: [
    { id: 'drafter', model: { provider: 'scripted', script: ['{"quality": 1}', '{"quality": 2}', '{"quality": 3}'] } },
    {
      id: 'reviewer',
      model: { provider: 'scripted', script: ['{"reviewed": true}', '{"reviewed": true}', '{"reviewed": true}'] },
    },
    { id: 'publisher', model: { provider: 'scripted', script: ['{"published": true}'] } },
  ],
  orchestration: {
    mode: 'graph',
    nodes: { draft: 'drafter', review: 'reviewer', publish: 'publisher' },
    edges: [
      { from: 'draft', to: 'review' },
      { from: 'review', to: 'draft', when: { var: 'quality', op: '<', value: 3 } },
      { from: 'review', to: 'publish' },
      { from: 'publish', to: '__end__' },
    ],
    start: 'draft',
    maxCycles: 5,
  },
});
