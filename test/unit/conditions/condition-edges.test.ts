// The edges of attestation conditions that decide admissions: which list operator means what, deep equality that
// does not mistake one shape for another, which texts are numbers and quantities, where "{{ }}" makes an
// expression, time_since's failures, CEL's inputs, and what a condition that did not compile leaves behind.
import assert from "node:assert/strict";
import { test } from "node:test";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { compileCel, evaluateCel } from "../../../src/core/conditions/cel-expression.ts";
import { compileConditions, evaluateConditions } from "../../../src/core/conditions/conditions.ts";
import { compileOperand, evaluateOperand } from "../../../src/core/conditions/jmespath-expression.ts";
import { CostMeter } from "../../../src/core/conditions/cost-meter.ts";
import { DeepWeights } from "../../../src/core/conditions/json-weight.ts";
import { compare, compareCost, isOperator, OPERATORS, show } from "../../../src/core/conditions/operators.ts";
import { parseQuantity } from "../../../src/core/conditions/values.ts";

const holds = (found: unknown, operator: Parameters<typeof compare>[1], expected: unknown) => compare(found, operator, expected) === undefined;

test("isOperator knows the operators by their exact names only", () => {
  assert.equal(isOperator("GreaterThanOrEquals"), true);
  for (const other of ["equals", "Equal", "", 1, null, undefined, ["Equals"]]) assert.equal(isOperator(other), false, JSON.stringify(other));
});

test("In and AnyIn: some found value is one of the expected; AllIn: every found value is", () => {
  for (const op of ["In", "AnyIn"] as const) {
    assert.equal(holds("a", op, ["a", "b"]), true, op);
    assert.equal(holds(["x", "a"], op, ["a", "b"]), true, op);
    assert.equal(holds(["x", "y"], op, ["a", "b"]), false, op);
  }
  assert.equal(holds(["a", "b"], "AllIn", ["a", "b", "c"]), true);
  assert.equal(holds(["a", "x"], "AllIn", ["a", "b"]), false);
});

test("NotIn and AllNotIn: no found value is expected; AnyNotIn: some found value is not", () => {
  for (const op of ["NotIn", "AllNotIn"] as const) {
    assert.equal(holds(["x", "y"], op, ["a", "b"]), true, op);
    assert.equal(holds(["x", "a"], op, ["a", "b"]), false, op);
    assert.equal(holds("b", op, ["a", "b"]), false, op);
  }
  assert.equal(holds(["x", "a"], "AnyNotIn", ["a", "b"]), true);
  assert.equal(holds(["a"], "AnyNotIn", ["a", "b"]), false);
  assert.equal(holds("a", "AnyNotIn", ["a"]), false);
});

test("GreaterThan is strict; values without an order (strings, lists) satisfy no ordering operator", () => {
  assert.equal(holds(5, "GreaterThan", 5), false);
  assert.equal(holds(6, "GreaterThan", 5), true);
  assert.equal(holds(5, "GreaterThanOrEquals", 5), true);
  assert.equal(holds(5, "LessThan", 5), false);
  for (const op of ["GreaterThan", "GreaterThanOrEquals", "LessThan", "LessThanOrEquals"] as const) {
    assert.equal(holds("b", op, "a"), false, op);
    assert.equal(holds("a", op, "b"), false, op);
    assert.equal(holds([2], op, [1]), false, op);
  }
});

test("equality is deep and shape-aware: lists, objects, and never a list for an object or a string", () => {
  assert.equal(holds(["a", "b"], "Equals", ["a", "b"]), true);
  assert.equal(holds(["a", "b"], "Equals", ["a", "c"]), false);
  assert.equal(holds(["a", "b"], "Equals", ["a"]), false);
  assert.equal(holds(["a", "b"], "Equals", "ab"), false);
  assert.equal(holds({ a: 1, b: [2] }, "Equals", { b: [2], a: 1 }), true);
  assert.equal(holds({ a: 1 }, "Equals", { a: 2 }), false);
  assert.equal(holds({ a: 1, b: 2 }, "Equals", { a: 1, b: 3 }), false);
  assert.equal(holds({ a: 1 }, "Equals", { a: 1, b: 2 }), false);
  assert.equal(holds({ a: 1 }, "Equals", { b: 1 }), false);
  assert.equal(holds({ 0: "x" }, "Equals", ["x"]), false);
  assert.equal(holds(["x"], "Equals", { 0: "x" }), false);
  assert.equal(compare(null, "Equals", {}), "null is not Equals {}");
  assert.equal(compare({}, "Equals", null), "{} is not Equals null");
  assert.equal(holds(null, "Equals", null), true);
});

test("numbers in text: signs, fractions, exponents and surrounding spaces are read as numbers", () => {
  for (const [text, value] of [
    ["-5", -5],
    ["+5", 5],
    ["12", 12],
    ["1.25", 1.25],
    ["3.", 3],
    [".25", 0.25],
    ["1e3", 1000],
    ["1E+3", 1000],
    ["1e-3", 0.001],
    ["2e10", 2e10],
    [" 5 ", 5],
    // Read as the number they write, not as a fraction times a power of ten (2.3 × 10² is 229.99999999999997).
    ["2.3e2", 230],
    ["2.3e-1", 0.23],
    ["4.35e12", 4.35e12],
  ] as const) {
    assert.equal(holds(text, "Equals", value), true, text);
  }
  assert.equal(holds("-5", "GreaterThan", -6), true);
  for (const text of ["5x", "x5", "1e", "1.2.3", "1e3.5", "--5", "."]) assert.equal(holds(text, "Equals", Number.parseFloat(text)), false, text);
  // Text that only starts like a number (a version, a date) is text, equal to itself.
  for (const text of ["1.2.3", "2024-01", "1e.5"]) assert.equal(holds(text, "Equals", text), true, text);
});

test("a number written with an exponent and the same quantity with a suffix are equal, either way round", () => {
  assert.equal(holds("1e3", "Equals", "1k"), true);
  assert.equal(holds("1k", "Equals", "1e3"), true);
  assert.equal(holds(" 1Ki ", "Equals", "1Ki"), true);
  assert.equal(holds("2k", "GreaterThan", "1e3"), true);
});

test("quantities: the whole text must be one, with sign, fraction and exponent read exactly", () => {
  assert.equal(parseQuantity("-1Ki"), -1024);
  assert.equal(parseQuantity("+1Ki"), 1024);
  assert.equal(parseQuantity("1.25Ki"), 1280);
  assert.equal(parseQuantity(".25Ki"), 256);
  assert.equal(parseQuantity("1e3"), 1000);
  assert.equal(parseQuantity("1E+3"), 1000);
  assert.equal(parseQuantity("1e-3"), 0.001);
  assert.equal(parseQuantity("1e10"), 1e10);
  assert.equal(parseQuantity("2e2k"), 200000);
  for (const text of ["x1Ki", "1Kix", "1Ki ", "1 Ki", "Ki", "1e", "1ex", "1.2.3k", "k1"]) assert.equal(parseQuantity(text), undefined, text);
});

test("the same quantity written with other suffixes or exponents is equal, as it is to Kubernetes", () => {
  assert.equal(holds("2.3u", "Equals", "2300n"), true);
  assert.equal(holds("2300n", "Equals", "2.3u"), true);
  assert.equal(holds("2.3u", "Equals", 0.0000023), true);
  assert.equal(holds("2.3e2k", "Equals", 230000), true);
  assert.equal(holds("0.1m", "Equals", "100u"), true);
  assert.equal(holds("1.1k", "Equals", "1100"), true);
  assert.equal(holds("2.3u", "Equals", "2301n"), false);
  assert.equal(parseQuantity("5.m"), 0.005);
  assert.equal(parseQuantity("1.5e1Ki"), 15360);
});

test("messages show values as JSON, long ones shortened to 120 characters", () => {
  assert.equal(compare(undefined, "Equals", undefined), "the field is missing (nothing found), so it is not Equals nothing (not found)");
  const exact = "x".repeat(118); // 120 characters with its quotes
  assert.equal(show(exact), JSON.stringify(exact));
  const longer = "x".repeat(119);
  assert.equal(show(longer), `"${"x".repeat(116)}...`);
  assert.equal(show(longer).length, 120);
});

test("only a whole value of the form {{ expression }} is an expression; anything else is a literal", () => {
  const data = { a: "from data" };
  assert.equal(evaluateOperand(compileOperand("  {{ a }}  "), data), "from data");
  assert.equal(evaluateOperand(compileOperand("{{a}}"), data), "from data");
  for (const literal of ["x {{ a }}", "{{ a }} x", "{ a }", 5, ["{{ a }}"], { k: "{{ a }}" }]) {
    assert.deepEqual(evaluateOperand(compileOperand(literal), data), literal, JSON.stringify(literal));
  }
});

test("an expression that does not compile is a load error naming it, with the parser's error as its cause", () => {
  assert.throws(
    () => compileOperand("{{ a[ }}"),
    (e: Error) => /^invalid JMESPath "a\[": /.test(e.message) && e.cause instanceof Error && hasErrorCode(e, "invalid-jmespath"),
  );
  // The reason is the parser's first line, with the position.
  assert.throws(
    () => compileCel("a +", ["a"]),
    (e: Error) => /^invalid CEL "a \+": <input>:1:\d+: [^\n]+$/.test(e.message) && e.cause instanceof Error && hasErrorCode(e, "invalid-cel"),
  );
});

test("time_since: a missing start, a missing end (measured to the evaluation's time), and texts that are not times", () => {
  const now = Date.parse("2025-06-01T12:00:00Z");
  const since = compileOperand("{{ time_since('', start, end) }}");
  assert.equal(evaluateOperand(since, { start: "2025-06-01T10:00:00Z" }, { now }), "2h0m0s", "a missing end is the evaluation's time");
  assert.equal(evaluateOperand(since, { start: "2025-06-01T10:00:00Z", end: "" }, { now }), "2h0m0s");
  assert.equal(evaluateOperand(since, { start: "2025-06-01T10:00:00Z", end: "2025-06-01T11:30:00Z" }, { now }), "1h30m0s");
  assert.throws(() => evaluateOperand(since, { end: "2025-06-01T11:00:00Z" }, { now }), {
    name: "ConditionError",
    code: "value-not-found",
    message: /time_since: the start time is not found/,
  });
  assert.throws(() => evaluateOperand(since, { start: "yesterday", end: "2025-06-01T11:00:00Z" }, { now }), {
    name: "ConditionError",
    code: "invalid-time",
    message: /time_since: "yesterday" is not an RFC 3339 time/,
  });
  assert.throws(() => evaluateOperand(since, { start: "2025-06-01T10:00:00Z", end: "later" }, { now }), {
    name: "ConditionError",
    code: "invalid-time",
    message: /time_since: "later" is not an RFC 3339 time/,
  });
});

test("the evaluation's time is lent to one evaluation only: the next one without a time does not see it", () => {
  const since = compileOperand("{{ time_since('', start, '') }}");
  const data = { start: "2025-06-01T10:00:00Z" };
  assert.equal(evaluateOperand(since, data, { now: Date.parse("2025-06-01T12:00:00Z") }), "2h0m0s");
  assert.throws(() => evaluateOperand(since, data), { name: "ConditionError", code: "no-evaluation-time", message: /the current time was not given/ });
});

test("CEL sees nested objects, nulls and the strings extension, and says why an input it cannot take fails", () => {
  const vars = ["p"];
  assert.equal(evaluateCel(compileCel("p.a.b == 1.0", vars), { p: { a: { b: 1 } } }), undefined);
  assert.equal(evaluateCel(compileCel("p.a[0].b == 'x'", vars), { p: { a: [{ b: "x" }] } }), undefined);
  assert.equal(evaluateCel(compileCel("p == null", vars), { p: null }), undefined);
  assert.equal(evaluateCel(compileCel("p.a == null", vars), { p: { a: null } }), undefined);
  assert.equal(evaluateCel(compileCel("p.lowerAscii() == 'abc'", vars), { p: "ABC" }), undefined);
  assert.equal(evaluateCel(compileCel("p.size() == 2", vars), { p: [1, 2] }), undefined);
  assert.equal(evaluateCel(compileCel("p", vars), { p: Symbol("s") }), 'CEL "p": unsupported input symbol');
  const shared = { a: { b: 1 } };
  const sameObject = compileCel("p.a.b == 1.0", vars);
  assert.equal(evaluateCel(sameObject, { p: shared }), undefined);
  assert.equal(evaluateCel(sameObject, { p: shared }), undefined, "a second evaluation over the same object");
});

test("a condition that does not compile leaves no compiled condition behind; its siblings compile", () => {
  const { conditions, errors } = compileConditions(
    [
      {
        all: [
          { key: "x", operator: "Bogus", value: 1 },
          { key: "{{ a[ }}", operator: "Equals", value: 1 },
          { key: 1, operator: "Equals", value: "{{ b[ }}" },
          { key: "{{ a }}", operator: "Equals", value: 1 },
        ],
      },
    ],
    ["conditions"],
  );
  assert.equal(errors.length, 3);
  assert.equal(conditions.blocks[0]!.all.length, 1);
  assert.equal(conditions.blocks[0]!.all[0]!.path, "conditions[0].all[3]");
});

test("a condition's own message replaces the operator's explanation", () => {
  const { conditions, errors } = compileConditions(
    [{ all: [{ key: "{{ severity }}", operator: "NotEquals", value: "critical", message: "critical findings block deployment" }] }],
    ["conditions"],
  );
  assert.deepEqual(errors, []);
  assert.equal(evaluateConditions(conditions, { severity: "critical" }), "conditions[0].all[0]: critical findings block deployment");
  assert.equal(evaluateConditions(conditions, { severity: "low" }), undefined);
});

test("CEL over an input that fails while it is read is a failure with the reason, not a crash", () => {
  const input = {
    get a(): unknown {
      throw new Error("unreadable");
    },
  };
  assert.equal(evaluateCel(compileCel("p.a == 1.0", ["p"]), { p: input }), 'CEL "p.a == 1.0": unreadable');
});

test("every list operator costs each item of one value against every item of the other; the others both values once", () => {
  // As docs/jmespath-cost-limits.md lists them.
  const listOperators = ["In", "AnyIn", "AllIn", "NotIn", "AnyNotIn", "AllNotIn"];
  const weights = new DeepWeights(new CostMeter());
  const found = ["a", "b", "c"]; // weight 1 + 3 × (1 + 1)
  const expected = ["x", "y"]; // weight 1 + 2 × (1 + 1)
  for (const operator of OPERATORS) {
    assert.equal(compareCost(found, operator, expected, weights), listOperators.includes(operator) ? 7 * 2 + 5 * 3 : 7 + 5, operator);
  }
});
