// The words of a kind's JSON Schema errors (core/schema-issues.ts), one schema keyword at a time: each names the
// field and what it must be, with the value given; a string field described as a thing ("A ...") is named by its
// description, and an empty list whose description says what its absence means is told to be left out.
import assert from "node:assert/strict";
import { test } from "node:test";
import { schemaCheck } from "../../src/core/schema-issues.ts";

const check = schemaCheck({
  type: "object",
  additionalProperties: false,
  required: ["name"],
  properties: {
    name: { description: "A lowercase name (letters a to z).", type: "string", pattern: "^[a-z]+$", maxLength: 8 },
    plain: { type: "string", pattern: "^[a-z]+$", minLength: 2, maxLength: 4 },
    nonEmpty: { type: "string", minLength: 1 },
    kind: { const: "Thing" },
    mode: { enum: ["On", "Off"] },
    count: { type: "integer" },
    flag: { type: "boolean" },
    tags: { description: "Tags. Absent: every tag.", type: "array", minItems: 1, items: { type: "string" } },
    pair: { type: "array", minItems: 2, maxItems: 2, items: { enum: ["a", "b"] } },
    any: { type: "array", minItems: 1, items: {} },
    nested: { type: "object", additionalProperties: false, properties: { a: {}, b: {} } },
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
});

test("a string field described as a thing is named by its description, whatever is wrong with it", () => {
  assert.deepEqual(issues({ name: "Web" }), ['name: must be a lowercase name (letters a to z), got "Web"']);
  assert.deepEqual(issues({ name: 7 }), ["name: must be a lowercase name (letters a to z), got 7"]);
  assert.deepEqual(issues({ name: "abcdefghi" }), ['name: must be a lowercase name (letters a to z), got "abcdefghi"']);
  assert.deepEqual(issues({ name: "x".repeat(100) }), [`name: must be a lowercase name (letters a to z), got "${"x".repeat(75)}…"`], "a long value is cut");
});

test("a string field without a description: its pattern and lengths", () => {
  assert.deepEqual(issues({ plain: "A1" }), ['plain: must be a string matching ^[a-z]+$, got "A1"']);
  assert.deepEqual(issues({ plain: "a" }), ['plain: must be at least 2 characters long, got "a"']);
  assert.deepEqual(issues({ plain: "abcde" }), ["plain: must be at most 4 characters long, got 5"]);
  assert.deepEqual(issues({ nonEmpty: "" }), ["nonEmpty: must not be empty"]);
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
  assert.deepEqual(issues({ wide: { j: 1 } }), ['wide.j: unknown field "j"']);
  assert.deepEqual(issues({ plian: "a" }), ['plian: unknown field "plian"; did you mean "plain"?']);
});
