import { defineCrew } from '../../src/index.js';

export const hierarchical = defineCrew({
  name: 'research',
  agents: [
    {
      id: 'manager',
      model: {
        provider: 'scripted',
        script: [
          '{"subtasks": [{"worker": "r1", "task": "prices"}, {"worker": "r2", "task": "reviews"}]}',
          'report: r1 found prices; r2 found reviews',
        ],
      },
    },
    { id: 'r1', model: { provider: 'scripted', script: ['r1 found prices'] } },
    { id: 'r2', model: { provider: 'scripted', script: ['r2 found reviews'] } },
  ],
  orchestration: { mode: 'hierarchical', manager: 'manager', workers: ['r1', 'r2'], goal: 'compare laptops' },
});
