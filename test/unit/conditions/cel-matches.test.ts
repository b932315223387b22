// CEL's matches() on the linear-time engine: RE2 syntax, unanchored as cel-go's, literal patterns refused when the
// expression loads, computed ones refused when they are met, and a value too long for its pattern an error (never
// a false that a negation would turn into true).
import assert from "node:assert/strict";
import { test } from "node:test";
import { celTruth, compileCel } from "../../../src/core/conditions/cel-expression.ts";
import { MAX_MATCH_WORK } from "../../../src/core/linear-regex.ts";

const VARS = ["object"];
const truth = (source: string, object: unknown) => celTruth(compileCel(source, VARS), { object });

test("matches() searches anywhere in the string with RE2's syntax, as cel-go does", () => {
  assert.equal(truth("object.name.matches('b+')", { name: "abbbc" }), true);
  assert.equal(truth("object.name.matches('^b+$')", { name: "abbbc" }), false);
  assert.equal(truth("object.name.matches('(?i)^ABB')", { name: "abbbc" }), true);
  assert.equal(truth("object.name.matches('^\\\\p{Greek}+$')", { name: "αβγ" }), true);
  assert.equal(truth("object.name.matches('^[[:digit:]]{3}$')", { name: "123" }), true);
  // Computed from literals: compiled when met (a pattern of unknown size would be over the cost estimate's limit).
  assert.equal(truth("object.name.matches('^web-' + '[0-9]$')", { name: "web-1" }), true);
});

test("a pattern that backtracks exponentially on JavaScript's engine is judged at once", { timeout: 10_000 }, () => {
  assert.equal(truth("object.name.matches('^(a|a)+$')", { name: `${"a".repeat(40)}!` }), false);
  assert.equal(truth("object.name.matches('(a+)+' + 'b')", { name: `${"a".repeat(40)}!` }), false);
});

test("a literal pattern RE2 refuses is a load error naming it; a computed one is an evaluation error", () => {
  assert.throws(
    () => compileCel("object.name.matches('(a)\\\\1') || object.name == 'x'", VARS),
    /^Error: CEL "object\.name\.matches\('\(a\)\\\\\\\\1'\) \|\| object\.name == 'x'": matches\("\(a\)\\\\1"\): invalid regular expression \(RE2 syntax\): invalid escape sequence: `\\1`: RE2 has no backreferences$/,
  );
  assert.throws(() => compileCel("[1].all(x, object.name.matches('(?=a)'))", VARS), /matches\("\(\?=a\)"\): .*RE2 has no look-around/);
  const computed = truth("object.name.matches('(?!' + 'a)')", { name: "a" });
  assert.ok(typeof computed === "object" && /matches\("\(\?!a\)"\): invalid regular expression \(RE2 syntax\)/.test(computed.error), JSON.stringify(computed));
});

test("a value too long for its pattern's work limit is an error, so a negation cannot turn it into a pass", () => {
  const pattern = "[a-z]{1000}";
  const long = "a".repeat(MAX_MATCH_WORK / 1000);
  const negated = truth(`!object.name.matches('${pattern}')`, { name: long });
  assert.ok(typeof negated === "object" && /too long to match against/.test(negated.error), JSON.stringify(negated));
  assert.equal(truth(`!object.name.matches('${pattern}')`, { name: "a".repeat(999) }), true);
});
