// @orkeon/sdk: a typed defineCrew over the types generated from the canonical crew schema
// (Orkeon EventHub & Crew Lifecycle specification, §13.4; the property is `event`,
// singular, §13.5). Keys are camelCase here; the crew's JSON (JSON.stringify(crew), or
// toDocument(crew)) is the canonical snake_case document the YAML loader, the Python
// CrewBuilder and `orkeon crew validate` read.
import type { OrkeonCrew } from './orkeon-crew.js';
import { SCHEMA } from './schema.generated.js';

export type * from './orkeon-crew.js';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = { readonly [key: string]: unknown };

/** A crew as written in TypeScript; serialises to the canonical document. */
export type DefinedCrew = Readonly<OrkeonCrew> & { toJSON(): { [key: string]: Json } };

const snake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

function resolve(schema: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref === 'string' && ref.startsWith('#/$defs/')) {
    const defs = SCHEMA.$defs as unknown as { [name: string]: Schema };
    const found = defs[ref.slice('#/$defs/'.length)];
    if (!found) throw new Error(`the crew schema has no definition ${ref}`);
    return resolve(found);
  }
  return schema;
}

/** Every schema a value at this position may follow (the branches of a oneOf). */
function candidates(schema: Schema): Schema[] {
  const resolved = resolve(schema);
  const branches = resolved.oneOf as Schema[] | undefined;
  return branches ? branches.flatMap(candidates) : [resolved];
}

function convert(value: unknown, schema: Schema): Json {
  const options = candidates(schema);
  if (Array.isArray(value)) {
    const items = options.map((s) => s.items as Schema | undefined).filter((s): s is Schema => !!s);
    return value.map((item) => convert(item, items[0] ?? {}));
  }
  if (value === null || typeof value !== 'object') return value as Json;
  const out: { [key: string]: Json } = {};
  for (const [key, item] of Object.entries(value as { [key: string]: unknown })) {
    if (item === undefined) continue;
    const declared = options.find((s) => s.properties && key in (s.properties as object));
    if (declared) {
      out[snake(key)] = convert(item, (declared.properties as { [key: string]: Schema })[key] ?? {});
      continue;
    }
    const extra = options.map((s) => s.additionalProperties).find((s) => typeof s === 'object');
    out[key] = convert(item, (extra as Schema | undefined) ?? {}); // a map's keys are data, kept as written
  }
  return out;
}

/** The canonical (snake_case) document of a crew written in TypeScript. */
export function toDocument(crew: OrkeonCrew): { [key: string]: Json } {
  return convert(crew, SCHEMA as unknown as Schema) as { [key: string]: Json };
}

/** Declare a crew; the compiler checks it against the generated types. */
export function defineCrew(crew: OrkeonCrew): DefinedCrew {
  const defined = { ...crew, toJSON: () => toDocument(crew) };
  return Object.freeze(defined);
}

export { SCHEMA };
