// Kubernetes label selectors (src/core/label-selector.ts), as policies' namespaceSelector uses them: matchLabels
// and every matchExpression must hold; how a selector is described in messages; and how one is read from a policy,
// each problem at its field (test/e2e/label-selector-validation.test.ts compares the verdicts with kube-apiserver's).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  compileLabelSelector,
  describeLabelSelector,
  labelKeyProblem,
  labelValueProblem,
  matchesLabelSelector,
  type LabelSelector,
} from "../../src/core/label-selector.ts";

const labels = { env: "prod", tier: "web", empty: "" };

test("matchLabels: every label equal", () => {
  assert.equal(matchesLabelSelector({}, labels), true);
  assert.equal(matchesLabelSelector({ matchLabels: { env: "prod", tier: "web" } }, labels), true);
  assert.equal(matchesLabelSelector({ matchLabels: { env: "prod", tier: "db" } }, labels), false);
  assert.equal(matchesLabelSelector({ matchLabels: { team: "a" } }, labels), false);
  assert.equal(matchesLabelSelector({ matchLabels: { empty: "" } }, labels), true);
  assert.equal(matchesLabelSelector({ matchLabels: { missing: "" } }, labels), false);
});

test("matchExpressions: In, NotIn, Exists, DoesNotExist, all of them", () => {
  const matches = (operator: "In" | "NotIn" | "Exists" | "DoesNotExist", key: string, values?: string[]) =>
    matchesLabelSelector({ matchExpressions: [{ key, operator, ...(values ? { values } : {}) }] }, labels);
  assert.equal(matches("In", "env", ["dev", "prod"]), true);
  assert.equal(matches("In", "env", ["dev"]), false);
  assert.equal(matches("In", "team", ["a"]), false);
  assert.equal(matches("In", "empty", [""]), true);
  // A missing key is never In, even a list holding the empty string or nothing at all.
  assert.equal(matches("In", "missing", [""]), false);
  assert.equal(matches("In", "env"), false);
  assert.equal(matches("NotIn", "env", ["dev"]), true);
  assert.equal(matches("NotIn", "env", ["dev", "prod"]), false);
  // As in Kubernetes: a missing key satisfies NotIn.
  assert.equal(matches("NotIn", "team", ["a"]), true);
  assert.equal(matches("NotIn", "env"), true);
  assert.equal(matches("Exists", "tier"), true);
  assert.equal(matches("Exists", "empty"), true);
  assert.equal(matches("Exists", "team"), false);
  assert.equal(matches("DoesNotExist", "team"), true);
  assert.equal(matches("DoesNotExist", "tier"), false);
  // Inherited properties are no labels.
  assert.equal(matches("Exists", "toString"), false);
  assert.equal(matches("DoesNotExist", "constructor"), true);
  const both: LabelSelector = {
    matchLabels: { env: "prod" },
    matchExpressions: [
      { key: "tier", operator: "In", values: ["web"] },
      { key: "team", operator: "DoesNotExist" },
    ],
  };
  assert.equal(matchesLabelSelector(both, labels), true);
  assert.equal(matchesLabelSelector(both, { ...labels, team: "a" }), false);
  assert.equal(matchesLabelSelector(both, { ...labels, env: "dev" }), false);
  // An operator the schema would refuse decides nothing.
  assert.equal(matchesLabelSelector({ matchExpressions: [{ key: "env", operator: "Gt" as "In" }] }, labels), true);
});

test("a selector described for messages", () => {
  assert.equal(describeLabelSelector({}), "<everything>");
  assert.equal(
    describeLabelSelector({
      matchLabels: { env: "prod", tier: "web" },
      matchExpressions: [
        { key: "team", operator: "In", values: ["a", "b"] },
        { key: "zone", operator: "NotIn", values: ["x"] },
        { key: "owner", operator: "Exists" },
        { key: "legacy", operator: "DoesNotExist" },
        { key: "other", operator: "In" },
      ],
    }),
    "env=prod,tier=web,team in (a,b),zone notin (x),owner,!legacy,other in ()",
  );
});

/** compileLabelSelector's result and its issues as "path: message". */
function read(raw: unknown): { selector: LabelSelector | undefined; problems: string[] } {
  const { selector, issues } = compileLabelSelector(raw, ["spec", "namespaceSelector"]);
  return { selector, problems: issues.map((i) => `${i.path.join(".")}: ${i.message}`) };
}

test("a valid selector is read as given, with nothing reported", () => {
  const raw = {
    matchLabels: { "app.kubernetes.io/name": "web", empty: "" },
    matchExpressions: [
      { key: "tier", operator: "In", values: ["web", ""] },
      { key: "zone", operator: "NotIn", values: ["x"] },
      { key: "owner", operator: "Exists" },
      { key: "legacy", operator: "DoesNotExist", values: [] },
    ],
  };
  assert.deepEqual(read(raw), { selector: raw, problems: [] });
  assert.deepEqual(read({}), { selector: {}, problems: [] });
  assert.deepEqual(read(undefined), { selector: undefined, problems: [] }, "an absent selector is no selector, and no problem");
});

test("each problem is reported at its field, and the parts in error are left out", () => {
  assert.deepEqual(read("env=prod"), {
    selector: undefined,
    problems: ['spec.namespaceSelector: must be a label selector (matchLabels, matchExpressions), got "env=prod"'],
  });
  assert.deepEqual(read({ matchLabel: { a: "b" } }).problems, [
    'spec.namespaceSelector.matchLabel: unknown field "matchLabel"; known fields: matchLabels, matchExpressions; did you mean "matchLabels"?',
  ]);
  assert.deepEqual(read({ matchLabels: ["a"] }), {
    selector: {},
    problems: ['spec.namespaceSelector.matchLabels: must be a map of label key → value, got ["a"]'],
  });
  assert.deepEqual(read({ matchLabels: { ok: "1", n: 1, "-bad": "x", good: "-bad" } }), {
    selector: { matchLabels: { ok: "1" } },
    problems: [
      "spec.namespaceSelector.matchLabels.n: must be a string, got 1",
      `spec.namespaceSelector.matchLabels.-bad: "-bad" is not a label key: its name must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
      `spec.namespaceSelector.matchLabels.good: "-bad" is not a label value: it must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
    ],
  });
  assert.deepEqual(read({ matchExpressions: { key: "a" } }).problems, ['spec.namespaceSelector.matchExpressions: must be a list, got {"key":"a"}']);
  const expressions = read({
    matchExpressions: [
      "tier",
      { key: "ok", operator: "Exists" },
      { key: 5, operator: "Exists" },
      { operator: "Exists" },
      { key: "a", operator: "in", values: ["x"] },
      { key: "a", operator: "In" },
      { key: "a", operator: "NotIn", values: [] },
      { key: "a", operator: "Exists", values: ["x"] },
      { key: "a", operator: "In", values: "x" },
      { key: "a", operator: "In", values: ["ok", 7, "no way"] },
      { key: "a", operator: "Exists", value: "x" },
      { key: "-bad", operator: "Exists" },
    ],
  });
  assert.deepEqual(expressions.selector, { matchExpressions: [{ key: "ok", operator: "Exists" }] });
  assert.deepEqual(expressions.problems, [
    'spec.namespaceSelector.matchExpressions.0: must be a mapping with key, operator and values, got "tier"',
    "spec.namespaceSelector.matchExpressions.2.key: must be a label key, got 5",
    "spec.namespaceSelector.matchExpressions.3.key: must be a label key, got nothing",
    'spec.namespaceSelector.matchExpressions.4.operator: must be one of In, NotIn, Exists, DoesNotExist, got "in"',
    "spec.namespaceSelector.matchExpressions.5.values: operator In needs at least one value",
    "spec.namespaceSelector.matchExpressions.6.values: operator NotIn needs at least one value",
    "spec.namespaceSelector.matchExpressions.7.values: operator Exists takes no values",
    'spec.namespaceSelector.matchExpressions.8.values: must be a list of strings, got "x"',
    "spec.namespaceSelector.matchExpressions.8.values: operator In needs at least one value",
    "spec.namespaceSelector.matchExpressions.9.values.1: must be a string, got 7",
    `spec.namespaceSelector.matchExpressions.9.values.2: "no way" is not a label value: it must be empty or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
    'spec.namespaceSelector.matchExpressions.10.value: unknown field "value"; known fields: key, operator, values; did you mean "values"?',
    `spec.namespaceSelector.matchExpressions.11.key: "-bad" is not a label key: its name must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
  ]);
});

test("label keys and values as Kubernetes checks them", () => {
  const name63 = "a".repeat(63);
  for (const key of [
    "a",
    "A9",
    "a.b_c-D",
    name63,
    "example.com/a",
    "a.b-c.d/" + name63,
    `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}/x`,
  ]) {
    assert.equal(labelKeyProblem(key), undefined, key);
  }
  const problems: Array<[string, string]> = [
    ["", "its name must be"],
    [name63 + "a", "its name must be"],
    ["-a", "its name must be"],
    ["a_", "its name must be"],
    ["a b", "its name must be"],
    ["é", "its name must be"],
    ["example.com/", 'its name after "/" must be'],
    ["example.com/-a", 'its name after "/" must be'],
    ["/a", 'the prefix before "/" must be a DNS subdomain'],
    ["Example.com/a", 'the prefix before "/" must be a DNS subdomain'],
    ["example..com/a", 'the prefix before "/" must be a DNS subdomain'],
    ["example_com/a", 'the prefix before "/" must be a DNS subdomain'],
    [`${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(62)}/x`, 'the prefix before "/" must be a DNS subdomain'],
    ["a/b/c", 'it has more than one "/"'],
  ];
  for (const [key, why] of problems) {
    const problem = labelKeyProblem(key) ?? "";
    assert.ok(problem.startsWith(`${JSON.stringify(key)} is not a label key: ${why}`), `${key}: ${problem}`);
  }
  for (const value of ["", "a", "A.b-c_9", name63]) assert.equal(labelValueProblem(value), undefined, value);
  for (const value of [name63 + "a", "-a", "a.", "a/b", "a b", "ü"])
    assert.match(labelValueProblem(value) ?? "", /is not a label value: it must be empty or at most 63/, value);
});
