// Kubernetes label selectors (src/core/label-selector.ts), as policies' namespaceSelector uses them: matchLabels
// and every matchExpression must hold; and how a selector is described in messages.
import assert from "node:assert/strict";
import { test } from "node:test";
import { describeLabelSelector, matchesLabelSelector, type LabelSelector } from "../../src/core/label-selector.ts";

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
