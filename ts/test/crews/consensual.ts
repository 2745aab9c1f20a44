import { defineCrew } from '../../src/index.js';

export const consensual = defineCrew({
  name: 'council',
  agents: [
    { id: 'v1', model: { provider: 'scripted', script: ['approve fine', 'approve looks good now'] } },
    { id: 'v2', model: { provider: 'scripted', script: ['reject too costly', 'approve looks good now'] } },
    { id: 'v3', model: { provider: 'scripted', script: ['reject no tests', 'approve looks good now'] } },
    { id: 'proposer', model: { provider: 'scripted', script: ['ship v2 with tests, half the cost'] } },
  ],
  orchestration: {
    mode: 'consensual',
    voters: ['v1', 'v2', 'v3'],
    proposal: 'ship v1',
    rule: 'supermajority',
    maxRounds: 3,
    proposer: 'proposer',
  },
});
