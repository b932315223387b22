// The words of a kind's JSON Schema errors (core/schema-issues.ts), one schema keyword at a time: each names the
// field and what it must be, with the value given; a string field described as a thing ("A ...") is named by its
// description, and an empty list whose description says what its absence means is told to be left out.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Ajv } from "ajv";
import { describeSchemaError, schemaCheck } from "../../src/core/schema-issues.ts";

const check = schemaCheck({
  type: "object",
  additionalProperties: false,
  required: ["name"],
  properties: {
    name: { description: "A lowercase name (letters a to z).", type: "string", pattern: "^[a-z]+$", maxLength: 8 },
    plain: { type: "string", pattern: "^[a-z]+$", minLength: 2, maxLength: 4 },
    // Described, but not as a thing: "A " further on does not count.
    letters: { description: "Lowercase letters. A to z only.", type: "string", pattern: "^[a-z]+$" },
    dns: { description: "A DNS name (letters, digits, '-' and '.').", type: "string", pattern: "^[a-z0-9.-]+$" },
    nonEmpty: { type: "string", minLength: 1 },
    kind: { const: "Thing" },
    mode: { enum: ["On", "Off"] },
    count: { type: "integer" },
    flag: { type: "boolean" },
    ratio: { type: "number" },
    nothing: { type: "null" },
    // A mapping or list described as a thing is still told its type: only string fields are named by their description.
    subject: { description: "A user or group of the request.", type: "object" },
    counts: { type: "array", items: { type: "integer" } },
    ratios: { type: "array", items: { type: "number" } },
    flags: { type: "array", items: { type: "boolean" } },
    loose: { type: "array" },
    // No kind's schema has a union of types; ajv names it as listed.
    maybe: { type: ["array", "null"], items: { type: "string" } },
    // Keywords without words of their own keep ajv's message.
    least: { type: "integer", minimum: 1 },
    some: { type: "object", minProperties: 1 },
    tags: { description: "Tags. Absent: every tag.", type: "array", minItems: 1, items: { type: "string" } },
    pair: { type: "array", minItems: 2, maxItems: 2, items: { enum: ["a", "b"] } },
    any: { type: "array", minItems: 1, items: {} },
    nested: { type: "object", additionalProperties: false, properties: { a: {}, b: {} } },
    eight: { type: "object", additionalProperties: false, properties: Object.fromEntries("abcdefgh".split("").map((k) => [k, {}])) },
    wide: { type: "object", additionalProperties: false, properties: Object.fromEntries("abcdefghi".split("").map((k) => [k, {}])) },
  },
});

const issues = (doc: Record<string, unknown>) => check({ name: "ok", ...doc }).map((i) => `${i.path.join(".")}: ${i.message}`);

test("a document that fits has no issue", () => {
  assert.deepEqual(check({ name: "ok", tags: ["a"], pair: ["a", "b"] }), []);
});

test("types, in a YAML author's words, with the value given", () => {
  assert.deepEqual(check("x"), [{ path: [], message: 'must be a mapping, got "x"' }]);
  assert.deepEqual(issues({ count: 1.5, flag: "yes", tags: "a", pair: { a: 1 }, any: 3, nested: [] }), [
    "count: must be an integer, got 1.5",
    'flag: must be true or false, got "yes"',
    'tags: must be a list of strings, got "a"',
    'pair: must be a list of "a", "b", got a mapping',
    "any: must be a list, got 3",
    "nested: must be a mapping, got a list",
  ]);
  assert.deepEqual(issues({ ratio: "1", nothing: 0, subject: "alice", counts: 1, ratios: 1, flags: 1, loose: 1, maybe: 1 }), [
    'ratio: must be a number, got "1"',
    "nothing: must be null, got 0",
    'subject: must be a mapping, got "alice"',
    "counts: must be a list of integers, got 1",
    "ratios: must be a list of numbers, got 1",
    "flags: must be a list of booleans, got 1",
    "loose: must be a list, got 1",
    "maybe: must be array,null, got 1",
  ]);
});

test("a string field described as a thing is named by its description, whatever is wrong with it", () => {
  assert.deepEqual(issues({ name: "Web" }), ['name: must be a lowercase name (letters a to z), got "Web"']);
  assert.deepEqual(issues({ name: 7 }), ["name: must be a lowercase name (letters a to z), got 7"]);
  assert.deepEqual(issues({ name: "abcdefghi" }), ['name: must be a lowercase name (letters a to z), got "abcdefghi"']);
  assert.deepEqual(issues({ name: "x".repeat(100) }), [`name: must be a lowercase name (letters a to z), got "${"x".repeat(75)}…"`], "a long value is cut");
  assert.deepEqual(
    issues({ name: "x".repeat(78) }),
    [`name: must be a lowercase name (letters a to z), got "${"x".repeat(78)}"`],
    "80 characters are shown whole",
  );
  assert.deepEqual(issues({ dns: "Web" }), [`dns: must be a DNS name (letters, digits, '-' and '.'), got "Web"`], "only the final period is dropped");
});

test("a string field without a description: its pattern and lengths", () => {
  assert.deepEqual(issues({ plain: "A1" }), ['plain: must be a string matching ^[a-z]+$, got "A1"']);
  assert.deepEqual(issues({ plain: "a" }), ['plain: must be at least 2 characters long, got "a"']);
  assert.deepEqual(issues({ plain: "abcde" }), ["plain: must be at most 4 characters long, got 5"]);
  assert.deepEqual(issues({ nonEmpty: "" }), ["nonEmpty: must not be empty"]);
  assert.deepEqual(issues({ letters: "A1" }), ['letters: must be a string matching ^[a-z]+$, got "A1"'], "a description that does not begin with an article");
});

test("allowed values and constants list what is allowed", () => {
  assert.deepEqual(issues({ kind: "Other", mode: "on" }), ['kind: must be "Thing", got "Other"', 'mode: must be one of "On", "Off", got "on"']);
});

test("list lengths: an empty list is told what leaving it out means, when its description says", () => {
  assert.deepEqual(issues({ tags: [], any: [] }), ["tags: must not be empty; leave it out for every tag", "any: must not be empty"]);
  assert.deepEqual(issues({ pair: ["a"] }), ["pair: must have at least 2 items, got 1"]);
  assert.deepEqual(issues({ pair: ["a", "b", "a"] }), ["pair: must have at most 2 items, got 3"]);
});

test("unknown and missing fields: a small section lists its fields, a large one names only the field meant", () => {
  assert.deepEqual(check({}), [{ path: [], message: 'missing required field "name"' }]);
  assert.deepEqual(issues({ nested: { c: 1 } }), ['nested.c: unknown field "c"; known fields: a, b']);
  assert.deepEqual(issues({ eight: { j: 1 } }), ['eight.j: unknown field "j"; known fields: a, b, c, d, e, f, g, h'], "eight fields are listed");
  assert.deepEqual(issues({ wide: { j: 1 } }), ['wide.j: unknown field "j"']);
  assert.deepEqual(issues({ plian: "a" }), ['plian: unknown field "plian"; did you mean "plain"?']);
});

test("keywords without words of their own keep ajv's message", () => {
  assert.deepEqual(issues({ least: 0, some: {} }), ["least: must be >= 1", "some: must NOT have fewer than 1 properties"]);
});

test("the schema is compiled strictly: a keyword ajv does not know is a mistake of the schema, refused at once", () => {
  assert.throws(() => schemaCheck({ type: "object", requried: ["name"] }), /strict mode: unknown keyword: "requried"/);
});

test("checking a document leaves it as it was: a schema's default is not written into it", () => {
  const document = { spec: {} };
  assert.deepEqual(
    schemaCheck({ type: "object", properties: { spec: { type: "object", properties: { default: { enum: ["deny", "allow"], default: "deny" } } } } })(document),
    [],
  );
  assert.deepEqual(document, { spec: {} });
});

test("an error without its schema (describeSchemaError given a plain ajv error) is worded from its keyword and value alone", () => {
  const validate = new Ajv({ allErrors: true, verbose: true }).compile({
    type: "object",
    additionalProperties: false,
    properties: { s: { type: "string" }, p: { type: "string", pattern: "^[a-z]+$" }, l: { type: "array", minItems: 1 }, n: { type: "array" } },
  });
  assert.equal(validate({ x: 1, s: 1, p: "A", l: [], n: 1 }), false);
  const described = validate.errors!.map((e) => describeSchemaError({ ...e, parentSchema: undefined }));
  assert.deepEqual(described.slice(1), [
    { path: ["s"], message: "must be a string, got 1" },
    { path: ["p"], message: 'must be a string matching ^[a-z]+$, got "A"' },
    { path: ["l"], message: "must not be empty" },
    { path: ["n"], message: "must be a list, got 1" },
  ]);
  assert.deepEqual(described[0]!.path, ["x"]);
  assert.match(described[0]!.message, /^unknown field "x"/);
});
