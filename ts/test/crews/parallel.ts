import { defineCrew } from '../../src/index.js';

export const parallel = defineCrew({
  name: 'scoring',
  agents: [
    { id: 'fast', model: { provider: 'scripted', script: ['score 7'] } },
    {
      id: 'slow',
      model: {
        provider: 'scripted',
        script: [{ call: 'wait_for_event', arguments: { topic: 'market.open', timeout_ms: 30000 } }, 'score 5'],
      },
    },
    { id: 'steady', model: { provider: 'scripted', script: ['score 7'] } },
  ],
  orchestration: {
    mode: 'parallel',
    branches: [
      { id: 'b1', agent: 'fast', task: 'score' },
      { id: 'b2', agent: 'slow', task: 'score' },
      { id: 'b3', agent: 'steady', task: 'score' },
    ],
    join: 'quorum',
    quorum: 2,
    aggregation: 'majority',
  },
});
