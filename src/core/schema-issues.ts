// A kind's JSON Schema errors (ajv) as the field issues every policy load reports: the field's path, and words a
// policy author can act on. Shared by every kind checked with a schema.
//
// Ajv words errors for schema writers ("must be object", "must NOT have fewer than 1 items", "must match pattern
// ..."); these say what the field must be in the words of a YAML author, with the value given. Two conventions of
// the schemas feed them:
//   - a string field whose `description` begins with an article ("A lowercase DNS name (...).") is that thing: a
//     value of the wrong type or shape is told it must be one;
//   - a list's `description` says what leaving it out means ("Absent: every cluster."): an empty list is told so.
import { Ajv, type ErrorObject } from "ajv";
import type { FieldIssue } from "./policy-kind.ts";
import { unknownFieldListingKnown, unknownFieldMessage } from "./primitives/unknown-field.ts";

/** A kind's JSON Schema as a check of its documents: each problem as a field issue; none when the document fits. */
export function schemaCheck(schema: object): (document: unknown) => FieldIssue[] {
  // verbose: an error carries its schema (the fields an unknown one may have meant, the words for a field) and the value.
  const validate = new Ajv({ allErrors: true, strict: true, useDefaults: false, verbose: true }).compile(schema);
  return (document) => (validate(document) ? [] : (validate.errors ?? []).map(describeSchemaError));
}

/** Sections of at most this many fields list them all when an unknown one is given; larger ones name only the field meant. */
const LISTED_FIELDS = 8;

interface SchemaNode {
  description?: string;
  properties?: Record<string, unknown>;
  items?: SchemaNode;
  type?: string;
  enum?: unknown[];
}

/** An ajv error as a field issue: its path, and words a policy author can act on (unknown fields name the known ones). */
export function describeSchemaError(e: ErrorObject): FieldIssue {
  const path: Array<string | number> = e.instancePath
    .split("/")
    .slice(1)
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
  const schema = e.parentSchema as SchemaNode | undefined;
  const got = `, got ${shown(e.data)}`;
  switch (e.keyword) {
    case "additionalProperties": {
      const key = String(e.params.additionalProperty);
      const known = Object.keys(schema?.properties ?? {});
      return { path: [...path, key], message: known.length <= LISTED_FIELDS ? unknownFieldListingKnown(key, known) : unknownFieldMessage(key, known) };
    }
    case "required":
      return { path, message: `missing required field ${JSON.stringify(e.params.missingProperty)}` };
    case "enum":
      return { path, message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}${got}` };
    case "const":
      return { path, message: `must be ${JSON.stringify(e.params.allowedValue)}${got}` };
    case "type":
      return { path, message: `must be ${(schema?.type === "string" ? namedBy(schema) : undefined) ?? typeWords(String(e.params.type), schema)}${got}` };
    case "pattern":
      return { path, message: `must be ${namedBy(schema) ?? `a string matching ${String(e.params.pattern)}`}${got}` };
    case "minLength":
    case "maxLength": {
      const named = namedBy(schema);
      if (named) return { path, message: `must be ${named}${got}` };
      const limit = Number(e.params.limit);
      if (e.keyword === "minLength") return { path, message: limit === 1 ? "must not be empty" : `must be at least ${limit} characters long${got}` };
      return { path, message: `must be at most ${limit} characters long, got ${String(e.data).length}` };
    }
    case "minItems": {
      const limit = Number(e.params.limit);
      if (limit === 1) return { path, message: `must not be empty${leftOut(schema)}` };
      return { path, message: `must have at least ${limit} items, got ${countOf(e.data)}` };
    }
    case "maxItems":
      return { path, message: `must have at most ${Number(e.params.limit)} items, got ${countOf(e.data)}` };
    default:
      return { path, message: e.message ?? e.keyword };
  }
}

/** What the field is, when its description begins by saying so: "A lowercase DNS name (...)." → "a lowercase DNS name (...)". */
function namedBy(schema: SchemaNode | undefined): string | undefined {
  const d = schema?.description;
  if (d === undefined || !/^An? /.test(d)) return undefined;
  return `a${d.slice(1)}`.replace(/\.$/, "");
}

/** "; leave it out for every cluster" when the list's description says what its absence means ("Absent: every cluster."). */
function leftOut(schema: SchemaNode | undefined): string {
  const absent = /\babsent: ([^.]+)/i.exec(schema?.description ?? "")?.[1];
  return absent === undefined ? "" : `; leave it out for ${absent}`;
}

const TYPE_WORDS: Record<string, string> = {
  object: "a mapping",
  array: "a list",
  string: "a string",
  integer: "an integer",
  number: "a number",
  boolean: "true or false",
  null: "null",
};
const ITEM_WORDS: Record<string, string> = { object: "mappings", string: "strings", integer: "integers", number: "numbers", boolean: "booleans" };

function typeWords(type: string, schema: SchemaNode | undefined): string {
  const words = TYPE_WORDS[type] ?? type;
  if (type !== "array") return words;
  const items = schema?.items;
  if (items?.enum) return `${words} of ${items.enum.map((v) => JSON.stringify(v)).join(", ")}`;
  const of = items?.type === undefined ? undefined : ITEM_WORDS[items.type];
  return of ? `${words} of ${of}` : words;
}

/** A value in a message: a scalar as written (long strings cut), a list or mapping by what it is. */
function shown(value: unknown): string {
  if (Array.isArray(value)) return "a list";
  if (value !== null && typeof value === "object") return "a mapping";
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 76)}…${text.at(-1)}` : text;
}

function countOf(value: unknown): number {
  return Array.isArray(value) ? value.length : 0;
}
