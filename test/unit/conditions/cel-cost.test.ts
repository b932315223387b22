// kube-apiserver's CEL limits: the estimated worst case refused when a policy loads (cel-cost-estimate.ts), and
// the cost of each evaluation counted while it runs and ended past its limit (cel-cost-meter.ts).
import assert from "node:assert/strict";
import { test } from "node:test";
import { parse } from "@bufbuild/cel";
import { estimateCost } from "../../../src/core/conditions/cel-cost-estimate.ts";
import {
  MATCH_CONDITIONS_COST_BUDGET,
  MAX_LIST_ITEMS,
  PER_CALL_COST_LIMIT,
  STATIC_ESTIMATED_COST_LIMIT,
} from "../../../src/core/conditions/cel-cost-limits.ts";
import { CostBudget, celTruth, compileCel, evaluateCel } from "../../../src/core/conditions/cel-expression.ts";
import { PAST_DEADLINE_REASON, withEvaluationDeadline } from "../../../src/core/conditions/evaluation-deadline.ts";

const VARS = ["object", "oldObject", "request", "namespaceObject"];
const estimate = (source: string) => estimateCost(parse(source).expr, VARS);

// [expression, accepted]: what kube-apiserver's estimator would say of it with every list of the request as long
// as 3 MiB allows, about a million items.
const TABLE: Array<[string, boolean]> = [
  ["object.spec.containers.all(c, c.image.startsWith('registry.example/'))", true],
  ["has(object.metadata.labels) && object.metadata.labels['team'] == 'a'", true],
  ["request.userInfo.groups.exists(g, g == 'x')", true],
  ["'developers' in request.userInfo.groups", true],
  ["has(object.metadata.labels) && 'tekton.dev/taskRun' in object.metadata.labels", true],
  ["!request.dryRun", true],
  ["object.metadata.name.matches('^[a-z0-9-]+$')", true],
  ["object.metadata.name.size() < 64 && object.metadata.name.lowerAscii().startsWith('team-')", true],
  ["object.metadata.name.split('-').size() <= 3", true],
  ["object.spec.containers.exists_one(c, c.name == 'main')", true],
  // The example kube-apiserver's documentation gives for matchConditions' loops.
  ["object.spec.containers.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || c.securityContext.privileged == false)", true],
  ["[1, 2, 3].all(x, [1, 2, 3].all(y, x != y || x == y))", true],
  ["{'a': 1, 'b': 2}.all(k, k.size() == 1)", true],
  // Loops inside loops over the request's lists: about 10^12 and more.
  ["object.spec.containers.all(a, object.spec.containers.all(b, a.name != b.name))", false],
  ["object.spec.containers.all(a, object.spec.containers.all(b, object.spec.containers.all(c, object.spec.containers.all(d, a.name != ''))))", false],
  ["object.spec.containers.exists(c, c.env.exists(e, e.name == 'X'))", false],
  ["object.spec.containers.map(c, object.spec.initContainers.map(i, i.name + c.name)).size() > 0", false],
  // A regular expression over every item of a list of unbounded strings, as kube-apiserver refuses it in a CRD.
  ["object.spec.containers.all(c, c.image.matches('^registry\\\\.example/.*$'))", false],
  // map() builds a list item per iteration (10 each): over a million items, more than the limit.
  ["object.spec.containers.map(c, c.image).size() > 0", false],
];

test("the estimate accepts ordinary expressions and refuses loops nested over the request's lists", () => {
  for (const [source, accepted] of TABLE) {
    const cost = estimate(source);
    assert.equal(cost <= STATIC_ESTIMATED_COST_LIMIT, accepted, `${source}: ${cost}`);
  }
});

test("the estimate follows cel-go's prices: identifiers, calls, literals and loops times a million items", () => {
  assert.equal(estimate("true"), 0);
  assert.equal(estimate("object"), 1);
  // Fields of the request are free to read (a select on dyn); an index is a call.
  assert.equal(estimate("object.metadata.name"), 1);
  assert.equal(estimate("object.metadata.labels['a']"), 2);
  assert.equal(estimate("has(object.metadata)"), 1);
  assert.equal(estimate("[1, 2]"), 10);
  assert.equal(estimate("{'a': 1}"), 30);
  // A field of a map the expression built costs 1.
  assert.equal(estimate("{'a': 1}.a"), 31);
  // == against a constant costs the constant's length / 10 (at least 1), against the request up to 314573.
  assert.equal(estimate("object.a == 'abcdefghijklmnopqrstu'"), 1 + 3);
  assert.equal(estimate("object.a == oldObject.a"), 2 + Math.ceil((3 * 1024 * 1024 - 2) / 10));
  // all(): the range, then per item its condition (2) and step (1 + the body).
  assert.equal(estimate("object.l.all(x, true)"), 1 + MAX_LIST_ITEMS * 3 + 1);
  assert.equal(estimate("[1, 2, 3].all(x, x > 0)"), 10 + 3 * (2 + 1 + 2) + 1);
  // && and || cost both sides; ?: the condition and the dearer branch.
  assert.equal(estimate("object.a && object.b"), 2);
  assert.equal(estimate("object.a ? [1] : [1, 2, 3]"), 1 + 10);
});

test("the estimate knows the size of what functions, literals and macros return", () => {
  const STRING = 3 * 1024 * 1024 - 2;
  const table: Array<[string, number]> = [
    // A string of the request is up to 3 MiB: lowerAscii() traverses it; what it returns is as long.
    ["object.s.lowerAscii().size() > 0", 1 + Math.ceil(STRING / 10) + 1 + 1],
    ["'ABC'.lowerAscii() == 'abc'", 1 + 1],
    ["'abc'.upperAscii() + 'x' == 'ABCx'", 1 + 1 + 1],
    ["'abc'.trim().startsWith('a')", 1 + 1],
    ["'abcdefghijklmnopqrstuvwxyz'.substring(1) == 'abcdefghijklmnopqrstuvwxyz'", 3 + 3],
    ["'abc'.charAt(1) == 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb'", 1 + 1],
    // split: up to one item per character, each up to the whole string.
    ["'a,b'.split(',').exists(x, x == 'a')", 1 + 4 * (3 + 3) + 1],
    ["'a-b'.replace('-', '----------').size() == 0", 1 + 1 + 1],
    ["'a-b'.replace('-', '----------') == 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'", 1 + 3],
    // join: the separators and an item.
    ["['aaaaaaaaaa', 'b'].join('----------') == 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'", 10 + 6 + 3],
    ["strings.quote('abcdefghijklmnopqrst') == 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'", 2 + 5],
    ["string(1) == 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'", 1 + 4],
    ["string('abcdefghijklmnopqrst') == 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'", 2 + 2],
    ["object.s.format([]) == ''", 1 + Math.ceil(STRING / 10) + 10 + 1],
    ["b'abc'.size() == 3", 1 + 1],
    // map() and filter() return a list of at most one item per item of their range, loops over it as many.
    ["[1, 2, 3].map(x, x).all(y, y > 0)", 10 + 10 + 3 * (1 + 10 + 1 + 1) + 1 + 3 * (2 + 1 + 2) + 1],
    ["[1, 2, 3].filter(x, x > 1).all(y, y > 0)", 10 + 10 + 3 * (2 + 1 + 10 + 1 + 1) + 1 + 3 * (2 + 1 + 2) + 1],
    ["{'a': 1, 'b': 2}.exists(k, k == 'a')", 30 + 2 * (3 + 3) + 1],
    // ?: costs the dearer branch and returns the larger.
    ["(object.a ? 'x' : 'yyyyyyyyyyyyyyyyyyyy') == 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz'", 1 + 2],
    ["object.a ? [1] : [1, 2, 3]", 1 + 10],
    ["{'a': 'xxxxxxxxxxxxxxxxxxxx'}.a == 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'", 30 + 1 + 2],
    ["{'a': 'xxxxxxxxxxxxxxxxxxxx'}['a'] == 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'", 30 + 1 + 2],
    // An item of a list holding request data may be as large as the request: the constant is the shorter.
    ["[object.a, 'xxxxxxxxxxxxxxxxxxxx'][1] == 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'", 10 + 1 + 1 + 3],
    ["dyn('xxxxxxxxxxxxxxxxxxxx') == 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'", 1 + 2],
    // A name that is no variable fails at run time: 1, and no size.
    ["unknown.field == 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'", 1 + 1],
    ["object.a == object.b", 2 + Math.ceil(STRING / 10)],
  ];
  const wrong = table.filter(([source, cost]) => estimate(source) !== cost).map(([source, cost]) => `${source}: ${estimate(source)}, not ${cost}`);
  assert.deepEqual(wrong, []);
});

test("the estimate follows sizes through literals, unions, comprehension variables and results", () => {
  const B30 = `'${"b".repeat(30)}'`;
  const A20 = `'${"a".repeat(20)}'`;
  const m20 = `{${Array.from({ length: 20 }, (_, i) => `'k${i}': ${i}`).join(", ")}}`;
  const l20 = `[${Array.from({ length: 20 }, (_, i) => i).join(", ")}]`;
  const table: Array<[string, number]> = [
    [`has(object.a) == ${B30}`, 1 + 1],
    ["{object.k: object.v}.size() > 0", 30 + 2 + 1 + 1],
    ["google.protobuf.Int64Value{value: 1} == 1", 40 + 1],
    [`{${A20}: 1}.exists(k, k == ${B30})`, 30 + (3 + 1 + 1 + 2) + 1],
    ["['abc'].all(x, x.size() > 0)", 10 + (2 + 1 + 2 + 1) + 1],
    [`[1, 2].map(x, ${A20}).all(s, s == ${B30})`, 10 + 10 + 2 * (1 + 10 + 1) + 1 + 2 * (2 + 1 + 1 + 2) + 1],
    // A loop's variable is out of scope after it.
    [`[${A20}].all(x, true) && x == ${B30}`, 10 + (2 + 1) + 1 + 1 + 1],
    ["object.l.all(x, true) == object.m", 1 + MAX_LIST_ITEMS * 3 + 1 + 1 + 1],
    ["object.a || object.b", 2],
    [`dyn(object.a) == ${B30}`, 1 + 1 + 3],
    [`('aaaaaaaaaa' + 'bbbbbbbbbb') == ${B30}`, 2 + 2],
    ["([1] + [2, 3]).all(x, true)", 10 + 10 + 1 + 3 * 3 + 1],
    [`([1] + [2]) == ${B30}`, 10 + 10 + 1 + 1],
    ...["lowerAscii()", "upperAscii()", "trim()", "substring(0)"].map((call): [string, number] => [`${A20}.${call} == ${B30}`, 2 + 2]),
    [`bytes(${A20}) == b${B30}`, 2 + 2],
    ["'x'.format([]) == object.a", 1 + 10 + 1 + Math.ceil((3 * 1024 * 1024 - 2) / 10)],
    [`'${"😀".repeat(20)}' == ${B30}`, 2],
    [`b${A20} == b${B30}`, 2],
    [`(object.a ? ${A20} : 'x') == ${B30}`, 1 + 2],
    [`(object.a ? 1 : ${A20}) == ${B30}`, 1 + 2],
    [`(object.a ? ${A20} : 1) == ${B30}`, 1 + 2],
    ["(object.a ? [1] : [1, 2, 3]).all(x, true)", 1 + 10 + 3 * 3 + 1],
    ["(object.a ? [1, 2, 3] : [1]).all(x, true)", 1 + 10 + 3 * 3 + 1],
    ["(object.a ? ['a'] : 1).all(x, true)", 1 + 10 + 3 + 1],
    ["(object.a ? {'a': 1} : {'a': 1, 'b': 2}).all(k, true)", 1 + 30 + 2 * 3 + 1],
    ["(object.a ? {'a': 1, 'b': 2} : {'a': 1}).all(k, true)", 1 + 30 + 2 * 3 + 1],
    ["(object.a ? {'a': 1} : 1).all(k, true)", 1 + 30 + 3 + 1],
    [`(object.a ? ['a'] : [${A20}]).all(x, x == ${B30})`, 1 + 10 + (2 + 1 + 1 + 2) + 1],
    [`(object.a ? {'a': 'x'} : {'a': ${A20}}).a == ${B30}`, 1 + 30 + 1 + 2],
    [`(object.a ? {'x': 1} : {${A20}: 1}).exists(k, k == ${B30})`, 1 + 30 + (3 + 1 + 1 + 2) + 1],
    ["'a' in ['a', 'b', 'c']", 10 + 3],
    [`${m20} == ${m20}`, 30 + 30 + 2],
    [`${l20} == ${l20}`, 10 + 10 + 2],
    // A field of the request is request data too; an item of a list holding request data is free to read.
    ["object.a.b == object.c.d", 2 + Math.ceil((3 * 1024 * 1024 - 2) / 10)],
    // A string of the request: 3 MiB less its quotes (matches() adds one to the length).
    ["object.a.matches('abcd')", 1 + Math.ceil((3 * 1024 * 1024 - 2 + 1) / 10)],
    ["[object.a, 'x'][0].b == 1", 10 + 1 + 1 + 1],
    // Inside a loop, a namespace's function is still one (the loop's variables are not `strings`).
    [`['a'].all(x, strings.quote(${A20}) == ${B30})`, 10 + (2 + 1 + 2 + 3) + 1],
    [`${A20}.split(',').exists(x, x == ${B30})`, 4 + 21 * (3 + 1 + 1 + 2) + 1],
    [`'abc'.join('-') == ${B30}`, 7 + 3],
    // + of a list and a string (an error at run time) has no size.
    [`([1] + 'abc') == ${B30}`, 10 + 1 + 1],
    [`('abc' + [1]) == ${B30}`, 10 + 1 + 1],
    ["['x', object.a][0].b == 1", 10 + 1 + 1 + 1],
  ];
  const wrong = table.filter(([source, cost]) => estimate(source) !== cost).map(([source, cost]) => `${source}: ${estimate(source)}, not ${cost}`);
  assert.deepEqual(wrong, []);
});

test("a node of no kind the parser writes costs nothing", () => {
  assert.equal(estimateCost({ $typeName: "cel.expr.Expr", id: 1n, exprKind: { case: undefined } }, VARS), 0);
});

test("an expression over the estimate's limit is a load error with the estimate and the limit", () => {
  const source = "object.spec.containers.all(a, object.spec.containers.all(b, a.name != b.name))";
  assert.throws(
    () => compileCel(source, VARS),
    (e: Error) =>
      e.message.startsWith(`CEL ${JSON.stringify(source)}: estimated cost `) &&
      /estimated cost \d\.\de\+\d+ exceeds budget by factor of more than 100x: at most 10000000 is allowed/.test(e.message),
  );
  // Just over: the factor with more digits (never "1.0x"), as kube-apiserver writes it; further over, one decimal.
  assert.throws(() => compileCel("object.spec.containers.map(c, c.image).size() > 0", VARS), {
    name: "ConditionError",
    code: "cost-limit",
    message: /estimated cost 13631489 exceeds budget by factor of 1\.363149x/,
  });
  assert.throws(
    () => compileCel("object.spec.containers.map(c, [c.image, c.name]).size() > 0", VARS),
    /estimated cost 25165814 exceeds budget by factor of 2\.5x/,
  );
  assert.equal(compileCel("object.spec.containers.all(c, c.image.startsWith('registry.example/'))", VARS).estimatedCost, 6291452);
  // The whole reason, in kube-apiserver's words and with what the estimate assumed.
  assert.throws(
    () => compileCel("object.spec.containers.map(c, [c.image, c.name]).size() > 0", VARS),
    (e: Error) =>
      e.message ===
      'CEL "object.spec.containers.map(c, [c.image, c.name]).size() > 0": estimated cost 25165814 exceeds budget by factor of 2.5x: ' +
        "at most 10000000 is allowed, counting every list, map and string of the request as large as a 3 MiB request allows " +
        "(try simplifying the expression: a loop over a list inside a loop over another is refused)",
  );
});

test("the estimate's limit and the reason's wording hold at their exact boundaries, as kube-apiserver's", () => {
  // A loop over a literal list of n items costs 11 + n × (3 + its body), `1 == 1` costs 1 and && adds its
  // operands: so expressions of exact costs can be written, checked here against the estimate.
  const zeros = (n: number) => `[${Array(n).fill(0).join(",")}]`;
  const costing = (cost: number, source: string) => {
    assert.equal(estimate(source), cost, source);
    return source;
  };
  // Exactly the limit loads (kube-apiserver refuses only an estimate above it); one unit more is refused.
  const atLimit = costing(
    10_000_000,
    `object.spec.containers.all(x, 1 == 1 && 1 == 1 && 1 == 1) && ${zeros(21)}.all(e, ${zeros(33)}.all(d, ${zeros(29)}.all(c, ${zeros(34)}.all(b, 1 == 1 && 1 == 1)) && 1 == 1))`,
  );
  assert.equal(compileCel(atLimit, VARS).estimatedCost, STATIC_ESTIMATED_COST_LIMIT);
  assert.throws(() => compileCel(`${atLimit} && 1 == 1`, VARS), /estimated cost 10000001 exceeds budget by factor of 1\.000000x:/);
  // A factor of exactly 1.5 is written with one decimal, and exactly 100 as a factor, not "more than 100x".
  const oneAndAHalf = costing(
    15_000_000,
    `object.spec.containers.all(x, 1 == 1 && 1 == 1 && 1 == 1) && ${zeros(38)}.all(e, ${zeros(29)}.all(d, ${zeros(29)}.all(c, ${zeros(43)}.all(b, 1 == 1 && 1 == 1 && 1 == 1)))) && 1 == 1`,
  );
  assert.throws(() => compileCel(oneAndAHalf, VARS), /estimated cost 15000000 exceeds budget by factor of 1\.5x:/);
  const hundred = costing(
    1_000_000_000,
    `object.spec.containers.all(x, ${zeros(3)}.all(d, ${zeros(13)}.all(c, ${zeros(3)}.all(b, true)))) && ${zeros(18)}.all(e, ${zeros(20)}.all(d, ${zeros(16)}.all(c, ${zeros(27)}.all(b, 1 == 1))))`,
  );
  assert.throws(() => compileCel(hundred, VARS), /estimated cost 1000000000 exceeds budget by factor of 100\.0x:/);
  // From 10^15 on, the estimate is written with an exponent.
  const exponent = costing(
    1e15,
    `object.spec.containers.all(x, object.spec.containers.all(y, ${zeros(5)}.all(e, ${zeros(5)}.all(d, ${zeros(6)}.all(c, true) && 1 == 1))) && ` +
      `${zeros(14)}.all(e, ${zeros(13)}.all(d, ${zeros(18)}.all(c, ${zeros(24)}.all(b, 1 == 1 && 1 == 1 && 1 == 1)) && 1 == 1))) && ` +
      `${zeros(18)}.all(e, ${zeros(26)}.all(d, ${zeros(17)}.all(c, ${zeros(26)}.all(b, 1 == 1))))`,
  );
  assert.throws(() => compileCel(exponent, VARS), /estimated cost 1\.0e\+15 exceeds budget by factor of more than 100x:/);
});

const containers = (n: number, image = "registry.example/app:1") => ({ spec: { containers: Array.from({ length: n }, (_, i) => ({ name: `c${i}`, image })) } });

test("an evaluation is ended past one million units, with kube-apiserver's reason, before the call that would pass it", () => {
  const contains = compileCel("object.s.contains('x')", VARS);
  assert.equal(celTruth(contains, { object: { s: "a".repeat(1000) + "x" } }), true);
  // A tenth of 20 million characters: 2 000 000 units.
  assert.deepEqual(celTruth(contains, { object: { s: "a".repeat(20_000_000) } }), {
    error: `CEL ${JSON.stringify(contains.source)}: operation cancelled: actual cost limit exceeded: one evaluation may cost at most ${PER_CALL_COST_LIMIT}`,
  });
});

test("a loop stops as soon as its count passes what the evaluation may spend, not at its end", () => {
  const all = compileCel("object.spec.containers.all(c, c.image.startsWith('registry.example/'))", VARS);
  const budget = new CostBudget(1000, "the test's expressions");
  assert.deepEqual(celTruth(all, { object: containers(10_000) }, budget), {
    error: `CEL ${JSON.stringify(all.source)}: running out of cost budget: the test's expressions may cost at most 1000 per request, and no further expression is evaluated`,
  });
  // The 10 000 containers would cost 70 000: it stopped within one iteration (7 units) of the limit.
  assert.ok(budget.remaining < 0 && budget.remaining > -7, String(budget.remaining));
});

test("each iteration of a loop is counted: the cost grows with the items, whatever the body", () => {
  const costOf = (source: string, n: number) => {
    const budget = new CostBudget(PER_CALL_COST_LIMIT, "test");
    celTruth(compileCel(source, VARS), { object: containers(n) }, budget);
    return PER_CALL_COST_LIMIT - budget.remaining;
  };
  for (const source of [
    "object.spec.containers.all(c, true)",
    "object.spec.containers.exists(c, false)",
    "object.spec.containers.exists_one(c, true)",
    "object.spec.containers.all(c, c.name.size() > 0)",
  ]) {
    const ten = costOf(source, 10);
    const hundred = costOf(source, 100);
    assert.ok(hundred - ten >= 90 * 2, `${source}: ${ten} for 10 items, ${hundred} for 100`);
  }
  // Reads: a variable and each field after it cost 1; a list built costs 10; comparing strings their length / 10.
  assert.equal(costOf("object.spec.containers[0].name == 'c0'", 1), 5 + 1);
  assert.equal(costOf("[object.spec] == [object.spec]", 1), 2 * (10 + 2) + 1);
  assert.equal(costOf("'x'.size() == 1", 0), 2);
});

test("at run time, calls are priced by their operands' sizes: strings, bytes, lists and maps", () => {
  const costOf = (source: string, object: unknown) => {
    const budget = new CostBudget(PER_CALL_COST_LIMIT, "test");
    assert.equal(celTruth(compileCel(source, VARS), { object }, budget), true, source);
    return PER_CALL_COST_LIMIT - budget.remaining;
  };
  const long = "x".repeat(1000);
  // object.s (2) and a tenth of the shorter string.
  assert.equal(costOf(`object.s == '${long}'`, { s: long }), 2 + 100);
  assert.equal(costOf("b'abcdefghijklmnopqrstuvwxyz' != b'abcdefghijklmnopqrstuvwxyZ'", {}), 3);
  // `in` a list of 500 searches it; a map of 500 is looked up.
  const items = Array.from({ length: 500 }, (_, i) => `k${i}`);
  assert.equal(costOf("'k499' in object.l", { l: items }), 2 + 500);
  assert.equal(costOf("'k499' in object.m", { m: Object.fromEntries(items.map((k) => [k, 1])) }), 2 + 1);
  // Comparing lists or maps: a tenth of the smaller.
  assert.equal(costOf("object.l == object.l", { l: items }), 2 + 2 + 50);
  const m = Object.fromEntries(items.map((k) => [k, 1]));
  assert.equal(costOf("object.m == object.m", { m }), 2 + 2 + 50);
  // An index into what a call returned: the index (1), the call and its receiver.
  assert.equal(costOf("object.s.split(',')[0] == 'a'", { s: "a,b" }), 1 + 2 + 1 + 1);
  // join() is priced by what it returns: 1000 characters joined twice over, a fifth.
  assert.equal(costOf(`object.l.join('') == '${"y".repeat(10)}' || true`, { l: Array(100).fill("x".repeat(10)) }), 2 + 200 + 1);
  // A counter for a field read is shared by every read of the same cost, and counts each.
  assert.equal(costOf("object.a == 1.0 && object.b == 1.0 && object.c == 1.0", { a: 1, b: 1, c: 1 }), 3 * (2 + 1));
});

test("at run time, a variable and each field or index after it cost 1, has() its operand, literals their base cost", () => {
  const costOf = (source: string, object: unknown) => {
    const budget = new CostBudget(PER_CALL_COST_LIMIT, "test");
    assert.equal(celTruth(compileCel(source, VARS), { object }, budget), true, source);
    return PER_CALL_COST_LIMIT - budget.remaining;
  };
  assert.equal(costOf("object.l[0] == 1.0", { l: [1] }), 3 + 1);
  assert.equal(costOf("has(object.a)", { a: 1 }), 1);
  assert.equal(costOf("has(object.a.b)", { a: { b: 1 } }), 2);
  assert.equal(costOf("{'a': object.v}.a == 1.0", { v: 1 }), 30 + 2 + 1 + 1);
  assert.equal(costOf("{object.k: 1}[object.k] == 1", { k: "x" }), 30 + 2 + 1 + 2 + 1);
  assert.equal(costOf("[object.a][0] == 1.0", { a: 1 }), 10 + 2 + 1 + 1);
  assert.equal(costOf("google.protobuf.Int64Value{value: 1} == 1", {}), 40 + 1);
  // all(): the range, then per item the condition (2) and the step (1 here), then the result (1).
  assert.equal(costOf("object.l.all(x, true)", { l: [1, 2] }), 2 + 2 * 3 + 1);
  assert.equal(costOf("object.l.exists(x, x == 2.0)", { l: [1, 2] }), 2 + 2 * (3 + 1 + 1 + 1) + 1);
});

test("the reason names the limit that was passed: one evaluation's, or what is left of a shared budget", () => {
  const contains = compileCel("object.s.contains('x')", VARS);
  const object = { s: "a".repeat(20_000_000) };
  // A budget with a whole million left: the evaluation's own limit is the one passed.
  assert.match((celTruth(contains, { object }, new CostBudget(PER_CALL_COST_LIMIT, "test")) as { error: string }).error, /actual cost limit exceeded/);
  assert.match((celTruth(contains, { object }, new CostBudget(PER_CALL_COST_LIMIT - 1, "test")) as { error: string }).error, /running out of cost budget/);
  // The budget counts the evaluations a limit ended: what they gave depends on the request, not only on their inputs.
  const budget = new CostBudget(PER_CALL_COST_LIMIT * 3, "test");
  assert.equal(celTruth(compileCel("object.s.size() > 0", VARS), { object }, budget), true);
  assert.equal(budget.endings, 0);
  celTruth(contains, { object }, budget);
  celTruth(contains, { object }, budget);
  assert.equal(budget.endings, 2);
});

test("past the review's deadline an evaluation ends at its next check (every 4096 units), and none starts", () => {
  const all = compileCel("object.l.all(x, true)", VARS);
  const object = { l: Array.from({ length: 10_000 }, () => 1) };
  // Never past: the deadline is read before the evaluation and once per 4096 units (30 003 here).
  let reads = 0;
  assert.equal(
    withEvaluationDeadline(
      () => (reads++, false),
      () => celTruth(all, { object }),
    ),
    true,
  );
  assert.equal(reads, 1 + Math.floor(30_003 / 4096));
  // Past after the first read: ended at 4096 units.
  reads = 0;
  const budget = new CostBudget(PER_CALL_COST_LIMIT, "test");
  const ended = withEvaluationDeadline(
    () => reads++ > 0,
    () => celTruth(all, { object }, budget),
  );
  assert.deepEqual(ended, { error: `CEL ${JSON.stringify(all.source)}: ${PAST_DEADLINE_REASON}` });
  // The reason says what ended it, and who decides then.
  assert.match((ended as { error: string }).error, /evaluation cancelled: the review ran past its deadline .*; the failure policy decides$/);
  assert.ok(PER_CALL_COST_LIMIT - budget.remaining < 4096 + 3, String(PER_CALL_COST_LIMIT - budget.remaining));
  assert.equal(budget.endings, 1, "an evaluation ended by the deadline is counted as ended");
  // Past already: nothing is evaluated.
  assert.deepEqual(
    withEvaluationDeadline(
      () => true,
      () => celTruth(compileCel("true", VARS), {}),
    ),
    { error: `CEL "true": ${PAST_DEADLINE_REASON}` },
  );
});

test("an evaluation may cost exactly its limit, not one unit more", () => {
  // 'x'.size() == 1: the size call and the comparison.
  const two = compileCel("'x'.size() == 1", VARS);
  assert.equal(celTruth(two, {}, new CostBudget(2, "test")), true);
  assert.match((celTruth(two, {}, new CostBudget(1, "test")) as { error: string }).error, /running out of cost budget: test may cost at most 1 per request/);
});

test("evaluations that share a budget stop when it runs out, and every later one fails at once", () => {
  const spend = compileCel("object.spec.containers.all(c, c.image.startsWith('registry.example/'))", VARS);
  const cheap = compileCel("object.spec.containers.size() > 0", VARS);
  const budget = new CostBudget(2500, "the matchConditions of one policy");
  // About 700 units each: three pass, the fourth passes the 400 left.
  const object = containers(100);
  for (let i = 0; i < 3; i++) assert.equal(celTruth(spend, { object }, budget), true, `evaluation ${i + 1}`);
  const reason = "running out of cost budget: the matchConditions of one policy may cost at most 2500 per request, and no further expression is evaluated";
  assert.deepEqual(celTruth(spend, { object }, budget), { error: `CEL ${JSON.stringify(spend.source)}: ${reason}` });
  assert.deepEqual(celTruth(cheap, { object }, budget), { error: `CEL ${JSON.stringify(cheap.source)}: ${reason}` });
  // Without a shared budget, each evaluation has its own million.
  assert.equal(celTruth(spend, { object }), true);
  // With a budget larger than a million, one evaluation still stops at a million (the per-call limit).
  const large = new CostBudget(MATCH_CONDITIONS_COST_BUDGET, "the matchConditions of one policy");
  assert.match(
    (celTruth(compileCel("object.s.contains('x')", VARS), { object: { s: "a".repeat(20_000_000) } }, large) as { error: string }).error,
    /actual cost limit exceeded/,
  );
});

test("counting leaves results and errors as they were", () => {
  const cases: Array<[string, Record<string, unknown>, boolean | RegExp]> = [
    ["object.a.b == 1.0", { object: { a: { b: 1 } } }, true],
    ["object.a[1] == 'y'", { object: { a: ["x", "y"] } }, true],
    ["object.a['k'] == 'v' && has(object.a.k) && !has(object.a.z)", { object: { a: { k: "v" } } }, true],
    ["object.a.missing == 1.0", { object: { a: {} } }, /field not found: missing|no such key/],
    ["[object.a, 2.0].exists(x, x == 2.0)", { object: { a: 1 } }, true],
    ["{'k': object.a}.k == 1.0", { object: { a: 1 } }, true],
    ["[1.0, 2.0, object.a].map(x, x * 2.0).filter(y, y > 2.0) == [4.0, 6.0]", { object: { a: 3 } }, true],
    ["object.l.exists_one(x, x == 2.0)", { object: { l: [1, 2, 3] } }, true],
    ["object.s.split(',').join('+') == 'a+b'", { object: { s: "a,b" } }, true],
    ["strings.quote(object.s) == '\"a\"'", { object: { s: "a" } }, true],
    ["object.s.matches('^a+$') && object.s.contains('a') && object.s.endsWith('a')", { object: { s: "aaa" } }, true],
    ["'a' in object.m && 2.0 in object.l", { object: { m: { a: 1 }, l: [1, 2] } }, true],
    ["object.a ? object.b : object.c", { object: { a: false, b: false, c: true } }, true],
    ["object.l.all(x, x > 0.0)", { object: { l: [1, -1] } }, false],
  ];
  for (const [source, bindings, expected] of cases) {
    const truth = celTruth(compileCel(source, VARS), bindings);
    if (expected instanceof RegExp) assert.match(typeof truth === "object" ? truth.error : String(truth), expected, source);
    else assert.equal(truth, expected, source);
  }
  assert.equal(evaluateCel(compileCel("object.l.size() == 2", VARS), { object: { l: [1, 2] } }), undefined);
});

test("on data within the request's size, an evaluation costs no more than ten times its estimate", () => {
  // The estimate prices a field read at 0 where the count charges 1: loops cost up to a few times more, never orders
  // of magnitude (the limits are 1 000 000 per evaluation and 10 000 000 estimated).
  const object = { spec: { containers: containers(2000).spec.containers.map((c) => ({ ...c, securityContext: { privileged: false } })) } };
  for (const [source] of TABLE.filter(([, accepted]) => accepted)) {
    const compiled = compileCel(source, VARS);
    const budget = new CostBudget(PER_CALL_COST_LIMIT, "test");
    celTruth(compiled, { object, oldObject: object, request: { userInfo: { groups: ["a", "b"] }, dryRun: false }, namespaceObject: null }, budget);
    const spent = PER_CALL_COST_LIMIT - budget.remaining;
    const perItem = Math.max(1, spent / 2000);
    assert.ok(perItem <= 10 * Math.max(1, compiled.estimatedCost / MAX_LIST_ITEMS), `${source}: ${spent} for 2000 items, estimated ${compiled.estimatedCost}`);
  }
});
