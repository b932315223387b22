// Attestation conditions (image-verification design): JMESPath operands, the operators with durations and
// quantities compared as such, all/any blocks, explained failures, load-time errors; and CEL as the alternative.
import assert from "node:assert/strict";
import { test } from "node:test";
import { search } from "@jmespath-community/jmespath";
import { compileCel, evaluateCel } from "../../../src/core/conditions/cel-expression.ts";
import { compileConditions, evaluateConditions, type RawConditionBlock } from "../../../src/core/conditions/conditions.ts";
import { timeReads } from "../../../src/core/conditions/jmespath-expression.ts";
import { compare } from "../../../src/core/conditions/operators.ts";
import { parseQuantity } from "../../../src/core/conditions/values.ts";
import { formatDuration, parseDuration } from "../../../src/core/primitives/duration.ts";

// The admission's time is an input of evaluation (the core reads no clock): a fixed one here.
const NOW = Date.parse("2025-06-01T12:00:00Z");
const hoursAgo = (h: number) => new Date(NOW - h * 3600e3).toISOString();
const scan = (score: number, finishedHoursAgo: number) => ({
  metadata: { scanFinishedOn: hoursAgo(finishedHoursAgo) },
  scanner: {
    uri: "pkg:github/aquasecurity/trivy@0.50.0",
    result: { Results: [{ Vulnerabilities: [{ CVSS: { nvd: { V3Score: score } } }, { CVSS: { nvd: { V3Score: 4 } } }] }] },
  },
});
const SEED: RawConditionBlock[] = [
  {
    all: [
      { key: "{{ time_since('', metadata.scanFinishedOn, '') }}", operator: "LessThan", value: "24h" },
      { key: "{{ scanner.result.Results[].Vulnerabilities[?CVSS.nvd.V3Score > `8.0`][] | length(@) }}", operator: "Equals", value: 0 },
    ],
  },
];

function compiled(blocks: RawConditionBlock[]) {
  const { conditions, errors } = compileConditions(blocks, ["conditions"]);
  assert.deepEqual(errors, []);
  return conditions;
}

test("the design's vulnerability-scan conditions: a fresh clean scan passes; a stale or vulnerable one says why", () => {
  const c = compiled(SEED);
  assert.equal(evaluateConditions(c, scan(5, 2), { now: NOW }), undefined);
  assert.equal(evaluateConditions(c, scan(5, 30), { now: NOW }), 'conditions[0].all[0]: "30h0m0s" is not LessThan "24h"');
  assert.equal(evaluateConditions(c, scan(9.8, 2), { now: NOW }), "conditions[0].all[1]: 1 is not Equals 0");
});

test("time_since measures to the evaluation's time, never the machine's clock; without a time it fails, saying so", () => {
  const c = compiled(SEED);
  const finished = scan(5, 0);
  assert.equal(evaluateConditions(c, finished, { now: NOW + 24 * 3600e3 - 1 }), undefined, "a millisecond short of 24 h");
  assert.equal(evaluateConditions(c, finished, { now: NOW + 24 * 3600e3 }), 'conditions[0].all[0]: "24h0m0s" is not LessThan "24h"');
  const since = compiled([{ all: [{ key: "{{ time_since('', metadata.scanFinishedOn, '') }}", operator: "Equals", value: "1h1s" }] }]);
  assert.equal(evaluateConditions(since, finished, { now: NOW + 3_601_000 }), undefined);
  assert.equal(evaluateConditions(c, finished), "conditions[0].all[0]: time_since: the current time was not given to the evaluation");
  const between = compiled([{ all: [{ key: "{{ time_since('', metadata.scanFinishedOn, '2025-06-01T13:00:00Z') }}", operator: "Equals", value: "1h" }] }]);
  assert.equal(evaluateConditions(between, finished), undefined, "an explicit end needs no current time");
  // Reads of the evaluation's time are counted (a judgement that read it holds only for that moment); an explicit end reads none.
  const reads = timeReads();
  evaluateConditions(between, finished, { now: NOW });
  assert.equal(timeReads(), reads);
  evaluateConditions(since, finished, { now: NOW });
  assert.equal(timeReads(), reads + 1);
  evaluateConditions(c, finished);
  assert.equal(timeReads(), reads + 2, "a read that found no time counts too");
});

test("any: at least one holds; every block must hold; a missing field is 'not found', not a crash", () => {
  const c = compiled([
    {
      all: [{ key: "{{ buildDefinition.buildType }}", operator: "Equals", value: "https://actions.github.io/buildtypes/workflow/v1" }],
      any: [
        { key: "{{ runDetails.builder.id }}", operator: "In", value: ["https://github.com/actions/runner"] },
        { key: "{{ runDetails.builder.id }}", operator: "Equals", value: "https://gitlab.com/runner" },
      ],
    },
  ]);
  const provenance = (builder: string) => ({
    buildDefinition: { buildType: "https://actions.github.io/buildtypes/workflow/v1" },
    runDetails: { builder: { id: builder } },
  });
  assert.equal(evaluateConditions(c, provenance("https://github.com/actions/runner")), undefined);
  assert.match(
    evaluateConditions(c, provenance("https://evil.example/runner")) ?? "",
    /^none of conditions\[0\]\.any\[0\]: .* is not In .*; conditions\[0\]\.any\[1\]/,
  );
  assert.equal(
    evaluateConditions(c, {}),
    'conditions[0].all[0]: the field is missing (nothing found), so it is not Equals "https://actions.github.io/buildtypes/workflow/v1"',
  );
});

test("operators: equality across numbers and numeric strings, lists, durations and quantities by magnitude", () => {
  assert.equal(compare(3, "Equals", "3"), undefined);
  assert.equal(compare("90m", "Equals", "1h30m"), undefined);
  assert.equal(compare("1Gi", "GreaterThan", "1000Mi"), undefined);
  // A plain number is a quantity without unit (found values from statements are compared so; literals written
  // "500m" are refused at load, below).
  assert.equal(compare("500m", "LessThan", "1"), undefined);
  assert.equal(compare("1Gi", "Equals", 1073741824), undefined);
  assert.equal(compare("2Gi", "LessThanOrEquals", "1073741824"), '"2Gi" is not LessThanOrEquals "1073741824"');
  assert.equal(compare("1h", "GreaterThan", 30), '"1h" is not GreaterThan 30', "a duration compares with durations only");
  assert.equal(compare(["a", "b"], "AllIn", ["a", "b", "c"]), undefined);
  assert.equal(compare(["a", "z"], "AnyIn", ["a"]), undefined);
  assert.match(compare(["a", "z"], "AllIn", ["a"]) ?? "", /is not AllIn/);
  assert.equal(compare(["x", "y"], "AllNotIn", ["a"]), undefined);
  assert.equal(compare(["a", "y"], "AnyNotIn", ["a"]), undefined);
  assert.equal(compare("a", "NotIn", ["b"]), undefined);
  assert.equal(compare({ k: [1, 2] }, "Equals", { k: [1, 2] }), undefined);
  assert.match(compare("abc", "GreaterThan", "abd") ?? "", /is not GreaterThan/, "strings have no order");
  assert.equal(parseDuration("1h30m"), 5_400_000);
  assert.equal(parseDuration("24 hours"), undefined);
  // Parsed durations are remembered (bounded): more distinct ones than it keeps still compare by magnitude.
  for (let m = 1; m <= 600; m++) assert.equal(compare(`${m}m`, "LessThan", `${m}m1s`), undefined, `${m}m`);
  assert.equal(compare("2m", "LessThan", "1m"), '"2m" is not LessThan "1m"');
  assert.equal(compare(" 90m", "Equals", "1h30m"), undefined, "surrounding space is ignored, remembered or not");
  assert.equal(formatDuration(97_384_000), "27h3m4s");
  assert.equal(parseQuantity("1.5Gi"), 1.5 * 2 ** 30);
  assert.equal(parseQuantity("42"), undefined);
});

test("a missing field fails every operator, the negative ones too, and the message says it is missing", () => {
  for (const operator of ["NotEquals", "NotIn", "AllNotIn", "AnyNotIn", "Equals", "In", "GreaterThanOrEquals", "LessThanOrEquals"] as const)
    assert.equal(compare(undefined, operator, ["critical"]), `the field is missing (nothing found), so it is not ${operator} ["critical"]`, operator);
  // A value taken from the data that is missing is no better: "must not equal a missing field" proves nothing.
  assert.equal(compare("high", "NotEquals", undefined), 'the value is missing (nothing found), so "high" is not NotEquals it');
  const c = compiled([{ all: [{ key: "{{ scanner.severity }}", operator: "NotEquals", value: "critical" }] }]);
  assert.equal(evaluateConditions(c, { scanner: {} }), 'conditions[0].all[0]: the field is missing (nothing found), so it is not NotEquals "critical"');
  assert.equal(evaluateConditions(c, { scanner: { severity: "low" } }), undefined);
});

test("NotEquals, GreaterThanOrEquals and LessThanOrEquals: each holds and fails where it should, at the boundary too", () => {
  assert.equal(compare("low", "NotEquals", "critical"), undefined);
  assert.equal(compare("critical", "NotEquals", "critical"), '"critical" is not NotEquals "critical"');
  assert.equal(compare(3, "NotEquals", "3"), '3 is not NotEquals "3"', "numbers and numeric strings are one value");
  assert.equal(compare(["a"], "NotEquals", ["a", "b"]), undefined);
  assert.equal(compare(5, "GreaterThanOrEquals", 5), undefined);
  assert.equal(compare(6, "GreaterThanOrEquals", 5), undefined);
  assert.equal(compare(4, "GreaterThanOrEquals", 5), "4 is not GreaterThanOrEquals 5");
  assert.equal(compare("1h", "GreaterThanOrEquals", "60m"), undefined);
  assert.equal(compare("59m", "GreaterThanOrEquals", "1h"), '"59m" is not GreaterThanOrEquals "1h"');
  assert.equal(compare(5, "LessThanOrEquals", 5), undefined);
  assert.equal(compare(4, "LessThanOrEquals", 5), undefined);
  assert.equal(compare(6, "LessThanOrEquals", 5), "6 is not LessThanOrEquals 5");
  assert.equal(compare("1Gi", "LessThanOrEquals", "1024Mi"), undefined);
  assert.equal(compare("1.5Gi", "LessThanOrEquals", "1Gi"), '"1.5Gi" is not LessThanOrEquals "1Gi"');
  assert.equal(compare("abc", "LessThanOrEquals", "abc"), '"abc" is not LessThanOrEquals "abc"', "strings have no order");
});

test("load errors: invalid JMESPath and unknown operators, with their field paths", () => {
  const { errors } = compileConditions(
    [{ all: [{ key: "{{ a[ }}", operator: "Equals", value: 1 }], any: [{ key: "x", operator: "Bogus", value: 1 }] }],
    ["spec", "rules", 0, "attestations", 0, "conditions"],
  );
  assert.deepEqual(
    errors.map((e) => [e.path.join("."), e.message.split(":")[0]]),
    [
      ["spec.rules.0.attestations.0.conditions.0.all.0.key", 'invalid JMESPath "a["'],
      [
        "spec.rules.0.attestations.0.conditions.0.any.0.operator",
        'unknown operator "Bogus"; use one of Equals, NotEquals, In, AnyIn, AllIn, NotIn, AnyNotIn, AllNotIn, GreaterThan, GreaterThanOrEquals, LessThan, LessThanOrEquals',
      ],
    ],
  );
});

test("CEL: compiled at load time, evaluated over the bindings, failures explained", () => {
  const uri = compileCel("predicate.scanner.uri.startsWith('pkg:github/aquasecurity/trivy')", ["predicate", "statement", "image"]);
  assert.equal(evaluateCel(uri, { predicate: scan(1, 1) }), undefined);
  assert.equal(evaluateCel(uri, { predicate: { scanner: { uri: "pkg:other" } } }), `CEL ${JSON.stringify(uri.source)} is false`);
  assert.match(evaluateCel(uri, { predicate: {} }) ?? "", /field not found: scanner/);
  assert.equal(evaluateCel(compileCel("attestations['x'].size() > 0", ["attestations"]), { attestations: { x: [{}] } }), undefined);
  assert.match(evaluateCel(compileCel("1 + 1", []), {}) ?? "", /gave (bigint|number), not a boolean/);
  assert.throws(() => compileCel("a +", ["a"]), /^ConditionError: invalid CEL "a \+": /);
});

test('a literal that is both a duration and a quantity ("500m") is refused at load, with both unambiguous spellings', () => {
  const errors = (value: unknown, key: unknown = "{{ size }}") =>
    compileConditions([{ all: [{ key, operator: "GreaterThan", value }] }], ["conditions"]).errors.map((e) => `${e.path.join(".")}: ${e.message}`);
  assert.deepEqual(errors("500m"), [
    'conditions.0.all.0.value: "500m" is both 500 minutes and the quantity 0.5: write "8h20m0s" for the duration or "0.5" for the quantity',
  ]);
  assert.deepEqual(errors("{{ size }}", "1.5m").length, 1, "in key too");
  for (const literal of ["-5m", "+5m", "1.25m", "5.m", ".25m", " 500m "]) assert.match(errors(literal).join(), /is both .* minutes and the quantity/, literal);
  assert.deepEqual(errors("1h30m"), [], "a duration with minutes is a duration only");
  assert.deepEqual(errors("500m0s"), []);
  assert.deepEqual(errors("0.5"), []);
  assert.deepEqual(errors("500Mi"), []);
  assert.deepEqual(errors("{{ '500m' }}"), [], "expressions are the data's business");
});

test("an expression that fails at run time (a function on the wrong type) fails its condition with the library's reason", () => {
  const c = compiled([{ all: [{ key: "{{ abs(name) }}", operator: "Equals", value: 1 }] }]);
  let reason = "";
  try {
    search({ name: "x" }, "abs(name)");
  } catch (e) {
    reason = (e as Error).message;
  }
  assert.match(reason, /^Invalid type: abs\(\)/);
  // Not a cost limit: the message is the library's own, not "comparing what its expressions found".
  assert.equal(evaluateConditions(c, { name: "x" }), `conditions[0].all[0]: ${reason}`);
  assert.equal(evaluateConditions(c, { name: -1 }), undefined);
});
