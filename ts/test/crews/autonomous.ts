import { defineCrew } from '../../src/index.js';

export const autonomous = defineCrew({
  name: 'startup',
  agents: [
    {
      id: 'root',
      budget: { maxToolCalls: 10 },
      model: {
        provider: 'scripted',
        script: [{ call: 'delegate', arguments: { role: 'planner', task: 'plan the feature' } }, 'feature shipped'],
      },
    },
  ],
  orchestration: {
    mode: 'autonomous',
    root: 'root',
    task: 'build the feature',
    maxDepth: 2,
    roles: {
      planner: {
        provider: 'scripted',
        perTask: true,
        script: [{ call: 'delegate', arguments: { role: 'coder', task: 'write it' } }, 'plan done'],
      },
      coder: { provider: 'scripted', script: ['code written'] },
    },
  },
});
