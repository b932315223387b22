// JMESPath evaluated on a cost meter (src/core/conditions/jmespath-cost.ts): a policy's expression, tenant text,
// cannot hold the server. Within its limits an evaluation gives the library's own answer (checked against the
// library on random data); every node and every value a step reads is counted as the file says; the expressions
// that would take minutes or gigabytes (data doubled at every step, `$` tested once per item, a shared value
// written out, lists compared item by item) end at one million units with the reason; the review's deadline ends
// an evaluation under way and starts none; the conditions of one policy share its budget.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { search, type JSONValue } from "@jmespath-community/jmespath";
import { PER_CALL_COST_LIMIT } from "../../../src/core/conditions/cel-cost-limits.ts";
import { ConditionError } from "../../../src/core/conditions/condition-error.ts";
import { compileConditions, evaluateConditions } from "../../../src/core/conditions/conditions.ts";
import { CostBudget, CostMeter } from "../../../src/core/conditions/cost-meter.ts";
import { PAST_DEADLINE_REASON, withEvaluationDeadline } from "../../../src/core/conditions/evaluation-deadline.ts";
import { compileOperand, evaluateOperand } from "../../../src/core/conditions/jmespath-expression.ts";
import { DeepWeights } from "../../../src/core/conditions/json-weight.ts";
import { compareCost } from "../../../src/core/conditions/operators.ts";
import { checkProperty, fuzzRuns } from "../../support/fuzz.ts";

const FILE = "test/unit/conditions/jmespath-cost.test.ts";
const operand = (expression: string) => compileOperand(`{{ ${expression} }}`);

/** What one evaluation of `expression` on `data` costs. */
function cost(expression: string, data: unknown): number {
  const meter = new CostMeter();
  evaluateOperand(operand(expression), data, {}, meter);
  return meter.spent;
}

/** The error an evaluation ends with. */
function ending(expression: string, data: unknown, run: (evaluate: () => unknown) => unknown = (f) => f()): ConditionError {
  try {
    run(() => evaluateOperand(operand(expression), data));
  } catch (e) {
    assert.ok(e instanceof ConditionError, String(e));
    return e;
  }
  assert.fail(`${expression} gave a value`);
}

const items = (n: number) => ({ items: Array.from({ length: n }, (_, i) => ({ v: i, name: `n${i % 7}` })) });

// Every kind of node the parser writes, and the functions, with and without expression references.
const EXPRESSIONS = [
  "a",
  "a.b.c",
  "a[0]",
  "a[-1]",
  "a[1:3]",
  "a[::-1]",
  "a[*].b",
  "a[].b",
  "a[]",
  "*.b",
  "a[?b]",
  "a[?b == `1`]",
  "a[?b > `0`].c",
  "a[?!b]",
  "[a, b]",
  "{x: a, y: b}",
  "a || b",
  "a && b",
  "!a",
  "a == b",
  "a != b",
  "a < b",
  "a ? b : c",
  "$.a",
  "a[*].[$.b]",
  "a | b",
  "`[1, 2]`",
  "'text'",
  "let $x = a in $x",
  "let $x = a in b[*].[$x]",
  "length(@)",
  "keys(@)",
  "values(@)",
  "type(a)",
  "to_string(@)",
  "to_number(a)",
  "to_array(a)",
  "not_null(x, a, b)",
  "contains(a, b)",
  "sort(a)",
  "sort_by(a, &b)",
  "max_by(a, &b)",
  "min_by(a, &b)",
  "map(&b, a)",
  "group_by(a, &b)",
  "join(',', a)",
  "reverse(a)",
  "merge(@, a)",
  "items(@)",
  "from_items(a)",
  "zip(a, b)",
  "sum(a)",
  "avg(a)",
  "max(a)",
  "min(a)",
  "abs(a)",
  "floor(a)",
  "starts_with(a, b)",
  "ends_with(a, b)",
  "find_first(a, b)",
  "split(a, b)",
  "upper(a)",
  "lower(a)",
  "trim(a)",
  "a + b",
  "-a",
];

const json: fc.Arbitrary<JSONValue> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom(null, true, false, 0, 1, -2, 2.5, "", "b", "a,b"),
    fc.string({ maxLength: 6 }),
    fc.integer({ min: -5, max: 5 }),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.constantFrom("a", "b", "c", "x"), tie("value"), { maxKeys: 4 }),
  ),
})).value as fc.Arbitrary<JSONValue>;

/** The library's answer as evaluateOperand gives answers (null is "not found"), or its error's message. */
function libraryAnswer(expression: string, data: JSONValue): { value: unknown } | { error: string } {
  try {
    const value = search(data, expression);
    return { value: value === null ? undefined : value };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

test("within its limits, a counted evaluation gives the library's own answer, or its own error", async () => {
  await checkProperty(
    fc.property(fc.constantFrom(...EXPRESSIONS), json, (expression, data) => {
      let counted: { value: unknown } | { error: string };
      try {
        counted = { value: evaluateOperand(operand(expression), data) };
      } catch (e) {
        counted = { error: (e as Error).message };
      }
      assert.deepEqual(counted, libraryAnswer(expression, data));
    }),
    { file: FILE, runs: fuzzRuns(2000) },
  );
});

test("a let variable is visible in an expression reference inside its body (lexical scope), where the library loses it", () => {
  // The library runs map's expression on the interpreter the function table was made by, outside the let's
  // scope; here each scope has its own, as JEP 11a (lexical scoping) has it.
  const data = { a: 1, b: [10, 20] };
  assert.deepEqual(evaluateOperand(operand("let $x = a in map(&[$x, @], b)"), data), [
    [1, 10],
    [1, 20],
  ]);
  assert.deepEqual(libraryAnswer("let $x = a in map(&[$x, @], b)", data), { error: "Error referencing undefined variable x" });
});

test("a node costs 1, and what a step builds or reads without descending costs its items, entries or a tenth of its characters", () => {
  assert.equal(cost("a", { a: 1 }), 1);
  // The projection, the field, each item's field, and the n values it builds.
  assert.equal(cost("items[*].v", items(10)), 2 + 2 * 10);
  assert.equal(cost("items[*].v", items(20)), 2 + 2 * 20);
  assert.equal(cost("[@, @]", 1), 3 + 2);
  // A filter tests each item (the test, the field, the item), and builds the ten that pass.
  assert.equal(cost("items[?v]", items(10)), 2 + 3 * 10 + 10);
  // Testing an object lists its keys: the document's one key, once per item.
  assert.equal(cost("items[?$]", items(10)), 2 + 4 * 10 + 10);
  assert.equal(cost("!a", { a: { x: 1, y: 2 } }), 3 + 2);
  assert.equal(cost("a || b", { a: { x: 1, y: 2 } }), 3 + 2);
  assert.equal(cost("a && b", { a: { x: 1, y: 2 } }), 3 + 2 + 1);
  // A function reads its arguments: length's list of ten.
  assert.equal(cost("length(items)", items(10)), 3 + 10);
  // sort also compares: n·log2(n+1) more, and builds its result.
  assert.equal(cost("sort(items[*].v)", items(16)), 1 + (2 + 2 * 16) + 1 + 16 + 16 * 5 + 16);
  // A flatten reads what it flattens; a slice what it slices.
  assert.equal(cost("items[]", items(10)), 1 + (1 + 1 + 10 + 1 + 10) + 10 + 10);
  assert.equal(cost("items[0:2]", items(10)), 4 + 10 + 2 + 2 + 2);
  // == reads both sides whole: a string a tenth of its characters, and 1.
  assert.equal(cost("a == b", { a: "x".repeat(100), b: "x".repeat(100) }), 5 + 2 * (1 + 10));
  // A `let` scope is counted like the rest: the let, its binding, the field, the variable.
  assert.equal(cost("let $x = a in $x", { a: 1 }), 4);
});

test("the edges of the count: what each step reads, and no more", () => {
  const text = "x".repeat(100); // a tenth: 10 units
  // == and != read both sides; < does not (numbers only); sides of different types are unequal at once.
  assert.equal(cost("a != b", { a: text, b: text }), 5 + 2 * (1 + 10));
  assert.equal(cost("a < b", { a: text, b: text }), 5);
  assert.equal(cost("a == b", { a: text, b: 1 }), 5);
  // Two objects: each weighs 1 and its entry (1 + the value's 1), and learning each weight walks its one entry.
  assert.equal(cost("a == b", { a: { x: 1 }, b: { x: 1 } }), 5 + 2 * 3 + 2);
  assert.equal(cost("a == a", { a: { x: 1 } }), 5, "one value compared with itself is not walked");
  // to_string of a string writes nothing new; join writes out every string of its list.
  assert.equal(cost("to_string(a)", { a: text }), 3 + 10 + 10);
  assert.equal(cost("join('', a)", { a: [text, text] }), 3 + 2 + (1 + 2 * 11 + 2) + 2 + 20);
  // Only an object's truth needs its keys listed: not an array's.
  assert.equal(cost("!a", { a: [1, 2, 3] }), 3);
  assert.equal(cost("a ? b : c", { a: { x: 1, y: 2 }, b: 1 }), 4 + 2);
  // A let body sees the document's root as its own.
  assert.equal(evaluateOperand(operand("let $x = a in $.b"), { a: 1, b: 2 }), 2);
  // Without a meter of the caller's, the evaluation settles its cost into the budget it was given.
  const budget = new CostBudget(1000, "test");
  evaluateOperand(operand("items[*].v"), items(2), { budget });
  assert.equal(budget.remaining, 1000 - (2 + 2 * 2));
});

test("a condition's operator costs both values whole, and a list operator each item of one against the other", () => {
  const weights = new DeepWeights(new CostMeter());
  const found = ["a", "b", "c"]; // weight 1 + 3 × 2
  const expected = ["x".repeat(21)]; // weight 1 + (1 + 3)
  assert.equal(compareCost(found, "AnyIn", expected, weights), 7 * 1 + 5 * 3);
  assert.equal(compareCost(expected, "AllNotIn", found, weights), 5 * 3 + 7 * 1);
  assert.equal(compareCost(found, "Equals", expected, weights), 7 + 5);
  assert.equal(compareCost(3, "GreaterThan", "2", weights), 1 + (1 + 1));
});

test("a shared value is weighed as often as it appears: writing out [@, @] repeated costs what the text would", () => {
  // Learning a weight costs a walk of each object once; writing it out costs the weight.
  const doubled = (times: number) => `${Array.from({ length: times }, () => "[@, @]").join(" | ")} | to_string(@)`;
  const small = cost(doubled(4), 1);
  const larger = cost(doubled(8), 1);
  assert.ok(larger > 16 * (small - 40), `${small} then ${larger}`);
  const ended = ending(doubled(40), 1);
  assert.equal(ended.code, "cost-limit-exceeded");
});

test("what would take minutes or gigabytes ends at one million units, with the expression and the reason", () => {
  const large = { ...items(50_000), s: "x".repeat(100_000), keys: Object.fromEntries(Array.from({ length: 50_000 }, (_, i) => [`k${i}`, i])) };
  const STALLS = [
    // The data doubled at every step: 2^40 items.
    Array.from({ length: 40 }, () => "[@, @][]").join(" | "),
    // The same inside a let, a map and a sort key: each scope and expression reference is counted.
    `let $d = @ in ${"let $d = [$d, $d][] in ".repeat(40)}$d`,
    `map(&(${Array.from({ length: 40 }, () => "[@, @][]").join(" | ")}), [@])`,
    `sort_by(items, &to_string($))`,
    // Quadratic: the document tested, written out or compared once per item.
    "items[?$.keys]",
    "items[?contains(to_string($.keys), 'x')]",
    "items[?@ == $]",
    "items[*].length($.s)",
    "items[*].merge($.keys, $.keys)",
    // Strings doubled: 100 000 characters times 4^4.
    "[s, s, s, s] | join('', @) | join('', [@, @, @, @]) | join('', [@, @, @, @]) | join('', [@, @, @, @])",
    "sort(keys(keys))",
  ];
  for (const expression of STALLS) {
    const e = ending(expression, large);
    assert.equal(e.code, "cost-limit-exceeded", expression);
    assert.equal(
      e.message,
      `JMESPath ${JSON.stringify(expression)}: operation cancelled: actual cost limit exceeded: one evaluation may cost at most ${PER_CALL_COST_LIMIT}`,
    );
  }
});

test("an evaluation may cost exactly its limit: the meter ends it at the unit that passes it", () => {
  const within = cost("items[*].v", items(499_999)); // 2 + 2n = 1 000 000
  assert.equal(within, PER_CALL_COST_LIMIT);
  assert.equal(ending("items[*].v", items(500_000)).code, "cost-limit-exceeded");
});

test("past the review's deadline an evaluation ends at its next check, and none starts", () => {
  let reads = 0;
  const data = items(100_000);
  const ended = ending("items[*].v", data, (evaluate) => withEvaluationDeadline(() => reads++ > 0, evaluate));
  assert.equal(ended.code, "past-deadline");
  assert.equal(ended.message, `JMESPath "items[*].v": ${PAST_DEADLINE_REASON}`);
  // Read every 4096 units: ended at the second read, not after the 200 002 units the whole would cost.
  assert.equal(reads, 2);
  // Past already: not even a field is read.
  const meter = new CostMeter();
  assert.throws(
    () =>
      withEvaluationDeadline(
        () => true,
        () => evaluateOperand(operand("a"), { a: 1 }, {}, meter),
      ),
    (e: unknown) => e instanceof ConditionError && e.code === "past-deadline",
  );
  assert.equal(meter.spent, 0);
  // A literal is no evaluation: it is what the policy wrote.
  assert.equal(
    withEvaluationDeadline(
      () => true,
      () => evaluateOperand(compileOperand("text"), {}),
    ),
    "text",
  );
});

test("a condition is one evaluation: comparing what its expressions found is counted, a list against a list item by item", () => {
  const data = { found: Array.from({ length: 2_000 }, (_, i) => `f${i}`), wanted: Array.from({ length: 2_000 }, (_, i) => `w${i}`) };
  const conditions = compileConditions([{ all: [{ key: "{{ found }}", operator: "AnyIn", value: "{{ wanted }}" }] }], []);
  assert.deepEqual(conditions.errors, []);
  // 2 000 × 2 000 comparisons: more than one evaluation may cost.
  assert.equal(
    evaluateConditions(conditions.conditions, data),
    `conditions[0].all[0]: comparing what its expressions found: operation cancelled: actual cost limit exceeded: one evaluation may cost at most ${PER_CALL_COST_LIMIT}`,
  );
  // Two hundred against two hundred is well within it, and is compared.
  const fewer = { found: data.found.slice(0, 200), wanted: [...data.wanted.slice(0, 199), "f7"] };
  assert.equal(evaluateConditions(conditions.conditions, fewer), undefined);
});

test("the conditions of one policy share its budget: once spent, every later condition fails at once with the reason", () => {
  const conditions = compileConditions([{ all: [1, 2, 3].map(() => ({ key: "{{ length(items) }}", operator: "GreaterThan", value: 0 })) }], []);
  assert.deepEqual(conditions.errors, []);
  const data = items(1_000); // each condition: 3 + 1 000 units, and its comparison 2
  const budget = new CostBudget(2_100, "the conditions of one policy");
  assert.equal(
    evaluateConditions(conditions.conditions, data, { budget }),
    'conditions[0].all[2]: JMESPath "length(items)": running out of cost budget: the conditions of one policy may cost at most 2100 per request, and no further expression is evaluated',
  );
  assert.ok(budget.remaining <= 0, String(budget.remaining));
  // Another request has its own budget, and the same conditions hold.
  assert.equal(evaluateConditions(conditions.conditions, data, { budget: new CostBudget(1e7, "the conditions of one policy") }), undefined);
});

test("only an object tested for truth lists its keys: a string, a number or null so tested costs nothing more", () => {
  const text = "x".repeat(100); // read whole, 10 units: not needed to know it is not empty
  // A filter tests each item (the test, the field, the item) and builds the ten that pass: their names are strings.
  assert.equal(cost("items[?name]", items(10)), 2 + 3 * 10 + 10);
  assert.equal(cost("!a", { a: text }), 3);
  assert.equal(cost("a || b", { a: text }), 3);
  assert.equal(cost("a ? b : c", { a: 7, b: 1 }), 4);
  assert.equal(cost("!a", {}), 3, "null");
});

test("== and != walk strings, and arrays and objects that are not one value; a number, a boolean or null is no walk", () => {
  // The comparator, its two fields, and the two values handed back to the library's comparison: 5.
  assert.equal(cost("a == b", { a: 1, b: 2 }), 5);
  assert.equal(cost("a != b", { a: true, b: false }), 5);
  // null against an object, either way round: unequal at once, nothing walked.
  assert.equal(cost("a == b", { b: { x: 1 } }), 5);
  assert.equal(cost("a == b", { a: { x: 1 } }), 5);
  assert.equal(cost("a != b", { b: [1, 2] }), 5);
  assert.equal(cost("a == b", {}), 5, "null and null are one value");
});

test("a value projection and a multi-select hash build values: the items and entries they build are counted", () => {
  const three = { a: { v: 1 }, b: { v: 2 }, c: { v: 3 } };
  // The projection, the object it projects (@), each value's field, and the three values it builds.
  assert.equal(cost("*.v", three), 2 + 3 + 3);
  // The hash, its two fields, and its two entries.
  assert.equal(cost("{x: a, y: b}", { a: 1, b: 2 }), 3 + 2);
  // The list, for comparison, counts the same way.
  assert.equal(cost("[a, b]", { a: 1, b: 2 }), 3 + 2);
});

test("a weight is learnt once per object: a shared part is weighed each time it appears and walked once", () => {
  const meter = new CostMeter();
  const weights = new DeepWeights(meter);
  const shared = [1, 2, 3]; // weight 1 + 3
  const doubled = [shared, shared]; // weight 1 + 2 × 4
  assert.equal(weights.of(doubled), 9);
  // Learning it walked the outer list's two items and the shared list's three, once.
  assert.equal(meter.spent, 2 + 3);
  assert.equal(weights.of(doubled), 9);
  assert.equal(weights.of(shared), 4);
  assert.equal(meter.spent, 2 + 3, "known weights cost nothing to read again");
});

test("the review's deadline is read when a meter has counted 4096 units, and every 4096 after", () => {
  let reads = 0;
  const meter = new CostMeter();
  withEvaluationDeadline(
    () => reads++ >= 0,
    () => {
      meter.charge(4095);
      assert.equal(reads, 0);
      assert.throws(() => meter.charge(1), { message: PAST_DEADLINE_REASON });
    },
  );
  assert.equal(reads, 1);
  assert.equal(meter.exceeded, PAST_DEADLINE_REASON);
  // A deadline not yet past is read again 4096 units after the last read.
  let later = 0;
  const counted = new CostMeter();
  withEvaluationDeadline(
    () => later++ > 0,
    () => {
      counted.charge(4100);
      counted.charge(4095);
      assert.equal(later, 1);
      assert.throws(() => counted.charge(1), { message: PAST_DEADLINE_REASON });
    },
  );
  assert.equal(later, 2);
});

test("an evaluation the meter ends keeps the meter's throw as its cause; one that never starts has none", () => {
  const ended = ending("items[*].v", items(500_000));
  assert.equal(ended.code, "cost-limit-exceeded");
  assert.ok(ended.cause instanceof Error, String(ended.cause));
  assert.equal(ended.cause.message, `operation cancelled: actual cost limit exceeded: one evaluation may cost at most ${PER_CALL_COST_LIMIT}`);
  const unstarted = ending("a", { a: 1 }, (evaluate) => withEvaluationDeadline(() => true, evaluate));
  assert.equal(unstarted.code, "past-deadline");
  assert.equal(Object.hasOwn(unstarted, "cause"), false);
});
