// Prints every crew of test/crews as one JSON object keyed by orchestration mode (the
// parity test reads it and compares each with the YAML and the Python builder).
import { autonomous } from './crews/autonomous.js';
import { consensual } from './crews/consensual.js';
import { graph } from './crews/graph.js';
import { hierarchical } from './crews/hierarchical.js';
import { parallel } from './crews/parallel.js';
import { sequential } from './crews/sequential.js';

console.log(JSON.stringify({ sequential, hierarchical, parallel, consensual, graph, autonomous }));
