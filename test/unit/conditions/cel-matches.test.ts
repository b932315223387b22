// CEL's matches() on the linear-time engine: RE2 syntax, unanchored as cel-go's, literal patterns refused when the
// expression loads, computed ones refused when they are met, a value too long for its pattern an error (never a
// false that a negation would turn into true), and which compiled patterns an expression keeps.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parse } from "@bufbuild/cel";
import { celTruth, compileCel } from "../../../src/core/conditions/cel-expression.ts";
import { celRegexEngine } from "../../../src/core/conditions/cel-matches.ts";
import { MAX_MATCH_WORK } from "../../../src/core/primitives/linear-regex.ts";

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

test("matches(text, pattern), the global form cel-go and kube-apiserver accept, judges as text.matches(pattern)", () => {
  assert.equal(truth("matches(object.name, 'b+')", { name: "abbbc" }), true);
  assert.equal(truth("matches(object.name, '^b+$')", { name: "abbbc" }), false);
  assert.equal(truth("!matches(object.name, '^(a|a)+$')", { name: `${"a".repeat(40)}!` }), true);
  // Priced as the method is: the receiver's place is taken by the first argument.
  assert.equal(compileCel("matches(object.name, 'b+')", VARS).estimatedCost, compileCel("object.name.matches('b+')", VARS).estimatedCost);
});

test("a pattern that backtracks exponentially on JavaScript's engine is judged at once", { timeout: 10_000 }, () => {
  assert.equal(truth("object.name.matches('^(a|a)+$')", { name: `${"a".repeat(40)}!` }), false);
  assert.equal(truth("object.name.matches('(a+)+' + 'b')", { name: `${"a".repeat(40)}!` }), false);
});

test("a literal pattern RE2 refuses is a load error naming it; a computed one is an evaluation error", () => {
  assert.throws(
    () => compileCel("object.name.matches('(a)\\\\1') || object.name == 'x'", VARS),
    /^ConditionError: CEL "object\.name\.matches\('\(a\)\\\\\\\\1'\) \|\| object\.name == 'x'": matches\("\(a\)\\\\1"\): invalid regular expression \(RE2 syntax\): invalid escape sequence: `\\1`: RE2 has no backreferences$/,
  );
  assert.throws(() => compileCel("[1].all(x, object.name.matches('(?=a)'))", VARS), {
    name: "ConditionError",
    code: "invalid-regex",
    message: /matches\("\(\?=a\)"\): .*RE2 has no look-around/,
  });
  // The global form's pattern is its second argument (a literal first argument is the text, not a pattern).
  assert.throws(() => compileCel("matches(object.name, '(a)\\\\1')", VARS), /matches\("\(a\)\\\\1"\): .*RE2 has no backreferences$/);
  assert.doesNotThrow(() => compileCel("matches('(', object.pattern) || object.name.startsWith('(')", VARS));
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

test("a matches() with no pattern, or one that is not a string, loads and fails when evaluated, as no overload takes it", () => {
  for (const source of [
    "object.name.matches()",
    "object.name.matches(1)",
    "object.name.matches(true)",
    "object.name.matches(null)",
    "object.name.matches(b'(')",
  ]) {
    const outcome = truth(source, { name: "a" });
    assert.ok(typeof outcome === "object" && /found no matching overload for 'matches'/.test(outcome.error), `${source}: ${JSON.stringify(outcome)}`);
  }
});

test("an expression keeps its literal patterns and the 16 computed patterns met most recently, each compiled once", () => {
  const source = "object.name.matches('^lit$') || object.name.matches(object.pattern)";
  const engine = celRegexEngine(parse(source), source);
  const literal = engine.compile("^lit$");
  const computed = Array.from({ length: 16 }, (_, i) => engine.compile(`^p${i}$`));
  computed.forEach((regex, i) => assert.equal(engine.compile(`^p${i}$`), regex, `pattern ${i} compiled again`));
  assert.equal(computed[3]!.test("p3"), true);
  // A 17th computed pattern drops the oldest, which is compiled again when it is met again; the literal stays.
  engine.compile("^p16$");
  assert.notEqual(engine.compile("^p0$"), computed[0]);
  assert.equal(engine.compile("^p15$"), computed[15]);
  assert.equal(engine.compile("^lit$"), literal);
  assert.equal(literal.test("lit"), true);
});

test("a computed pattern RE2 refuses is refused by the engine with the code of an invalid pattern", () => {
  const source = "object.name.matches(object.pattern)";
  const engine = celRegexEngine(parse(source), source);
  assert.throws(() => engine.compile("(?!a)"), {
    name: "ConditionError",
    code: "invalid-regex",
    message: /^matches\("\(\?!a\)"\): invalid regular expression \(RE2 syntax\)/,
  });
});
