import { defineCrew } from '../../src/index.js';

// The sequential crew of examples/crews/sequential.yaml.
export const sequential = defineCrew({
  name: 'newsroom',
  description: 'A writer drafts, waits for a review request, an editor edits.',
  idleTimeout: '5m',
  agents: [
    {
      id: 'writer',
      role: 'writer',
      model: {
        provider: 'scripted',
        script: [
          { call: 'publish_event', arguments: { topic: 'drafts.ready', payload: { title: 'Actors' } } },
          { call: 'wait_for_event', arguments: { topic: 'reviews.requested', timeout_ms: 60000 } },
          'draft: actors are data',
        ],
      },
    },
    { id: 'editor', role: 'editor', model: { provider: 'scripted', script: ['edited(draft: actors are data)'] } },
  ],
  orchestration: {
    mode: 'sequential',
    tasks: [
      { description: 'write a draft', agent: 'writer' },
      { description: 'edit the draft', agent: 'editor' },
    ],
  },
  event: { publish: [{ topic: 'drafts.ready' }] },
});
