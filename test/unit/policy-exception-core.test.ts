// The PolicyException core on its own (src/core/policy-exception/), below the engine that
// test/unit/engine/policy-exceptions.test.ts drives: which filters select a subject, which failures an entry
// covers, what a decision keeps, and what the kind refuses to load. Some cases cannot arise through the engine
// (an exception naming the request-level policy, a denial without failures); they are tested here because the
// core must hold on its own.
import assert from "node:assert/strict";
import { test } from "node:test";
import { subjectOfObject, type AdmissionSubject } from "../../src/core/admission-subject.ts";
import { deny, type Decision, type Violation } from "../../src/core/decision.ts";
import { applyExceptions, exceptionsFor } from "../../src/core/policy-exception/apply-exceptions.ts";
import { labelsOf, policyExceptionKind, type PolicyException } from "../../src/core/policy-exception/policy-exception-kind.ts";

const HONOURED = new Set(["exceptions"]);

function compile(spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: "x", namespace: "exceptions" }) {
  return policyExceptionKind.compile(
    { apiVersion: "imprimatur.dev/v1alpha1", kind: "PolicyException", metadata, spec },
    { source: { origin: "test.yaml" } as never },
  );
}

function exception(spec: Record<string, unknown>, name = "x"): PolicyException {
  const compiled = compile(spec, { name, namespace: "exceptions" });
  assert.deepEqual(compiled.issues, []);
  return compiled.policy!;
}

function subject(labels?: Record<string, unknown>, name = "nightly-1", namespace = "batch"): AdmissionSubject {
  const plan = subjectOfObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, ...(labels ? { labels } : {}) },
    spec: { containers: [{ name: "c", image: "registry.example.com/app:1" }] },
  });
  assert.ok(plan.review);
  return plan.subject;
}

const failure = (policy: string, rule = "rules[0]", extra: Partial<Violation> = {}): Violation => ({ policy, rule, message: `${policy} says no`, ...extra });
const anyPod = { match: { any: [{ resources: { kinds: ["Pod"] } }] } };

test("a filter's namespaces and names match when any of their patterns does", () => {
  const byNamespace = exception({ exceptions: [{ policyName: "p" }], match: { any: [{ resources: { namespaces: ["other", "ba*"] } }] } });
  const byName = exception({ exceptions: [{ policyName: "p" }], match: { any: [{ resources: { names: ["other", "nightly-?"] } }] } });
  assert.equal(exceptionsFor([byNamespace], HONOURED, subject()).length, 1);
  assert.equal(exceptionsFor([byName], HONOURED, subject()).length, 1);
  assert.equal(exceptionsFor([byName], HONOURED, subject(undefined, "nightly-10")).length, 0, "? is one character");
});

test("a selector on a pod without labels, or with labels that are not a map, does not match, and nothing breaks", () => {
  const selecting = exception({ exceptions: [{ policyName: "p" }], match: { any: [{ resources: { selector: { matchLabels: { team: "a" } } } }] } });
  assert.equal(exceptionsFor([selecting], HONOURED, subject()).length, 0);
  assert.equal(exceptionsFor([selecting], HONOURED, subject({ team: "a" })).length, 1);
  assert.deepEqual(labelsOf({ metadata: { labels: "team=a" } }), {});
  assert.deepEqual(labelsOf({}), {});
  assert.deepEqual(labelsOf({ metadata: { labels: { team: "a", version: 1 } } }), { team: "a" }, "a value that is no string is no label");
});

test("an entry covers its own policy only, and an exception applies when any of its entries covers the failure", () => {
  const second = exception({ exceptions: [{ policyName: "unrelated" }, { policyName: "p" }], ...anyPod });
  const d = applyExceptions(deny([failure("p"), failure("q")]), subject(), [second], HONOURED);
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => v.policy),
    ["q"],
    "q is not named: it still denies",
  );
  assert.deepEqual(
    d.exemptions?.map((x) => x.violation.policy),
    ["p"],
  );
  assert.deepEqual(d.auditAnnotations, { "policy-exceptions": "exceptions/x" }, "no verdict annotation where the input had none");
});

test("the request-level policy is never covered, even by an entry naming it (which the loader refuses)", () => {
  const forged: PolicyException = { ...exception({ exceptions: [{ policyName: "p" }], ...anyPod }), exceptions: [{ policyName: "imprimatur" }] };
  const d = applyExceptions(deny([failure("imprimatur", "imageReference")]), subject(), [forged], HONOURED);
  assert.equal(d.allowed, false);
  assert.equal(d.exemptions, undefined);
});

test("a decision nothing fails, or one no selecting exception covers, comes back as it was", () => {
  const ex = exception({ exceptions: [{ policyName: "p" }], ...anyPod });
  const clean: Decision = { allowed: true, violations: [], warnings: [], auditAnnotations: {} };
  assert.equal(applyExceptions(clean, subject(), [ex], HONOURED), clean);
  const other = deny([failure("q")]);
  assert.equal(applyExceptions(other, subject(), [ex], HONOURED), other, "the same object: no policy-exceptions annotation, no warning");
});

test("a denial with no failure to set aside stays a denial, whatever its advisories", () => {
  const ex = exception({ exceptions: [{ policyName: "p" }], ...anyPod });
  const odd: Decision = { allowed: false, violations: [], advisories: [failure("p")], warnings: [], auditAnnotations: {} };
  assert.equal(applyExceptions(odd, subject(), [ex], HONOURED), odd);
});

test("what is kept: advisories not set aside, the verdict annotation of a denial that stands, every exception named once", () => {
  const a = exception({ exceptions: [{ policyName: "p", ruleNames: ["rules[0]"] }], ...anyPod }, "a");
  const b = exception({ exceptions: [{ policyName: "p", ruleNames: ["rules[1]"] }], ...anyPod }, "b");
  const input: Decision = {
    ...deny([failure("p", "rules[0]"), failure("p", "rules[1]"), failure("q")]),
    advisories: [failure("w", "rules[0]", { actions: ["Warn"] })],
    auditAnnotations: { decision: "denied", other: "kept" },
  };
  const d = applyExceptions(input, subject(), [a, b], HONOURED);
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.advisories?.map((v) => v.policy),
    ["w"],
  );
  assert.deepEqual(d.auditAnnotations, { decision: "denied", other: "kept", "policy-exceptions": "exceptions/a,exceptions/b" });

  const admitted = applyExceptions({ ...input, violations: input.violations.slice(0, 2) }, subject(), [a, b], HONOURED);
  assert.equal(admitted.allowed, true);
  assert.deepEqual(admitted.auditAnnotations, { other: "kept", "policy-exceptions": "exceptions/a,exceptions/b" }, "no verdict of a denial that went");
});

test("many failures set aside: the warnings are capped with how many more", () => {
  const ex = exception({ exceptions: [{ policyName: "p" }], ...anyPod });
  const d = applyExceptions(deny(Array.from({ length: 25 }, (_, i) => failure("p", `rules[${i}]`))), subject(), [ex], HONOURED);
  assert.equal(d.exemptions?.length, 25);
  assert.equal(d.warnings.length, 21);
  assert.equal(d.warnings.at(-1), "set aside by PolicyExceptions: … and 5 more");
});

test("the kind is registered under the name documents give", () => {
  assert.equal(policyExceptionKind.kind, "PolicyException");
  assert.deepEqual(policyExceptionKind.apiVersions, ["imprimatur.dev/v1alpha1"]);
});

test("metadata.namespace must be a namespace name: a DNS label of at most 63 characters", () => {
  const spec = { exceptions: [{ policyName: "p" }], ...anyPod };
  for (const good of ["a", "team-a", "a".repeat(63)]) assert.ok(compile(spec, { name: "x", namespace: good }).policy, good);
  assert.deepEqual(
    compile(spec, { name: "x", namespace: 7 }).issues,
    [{ path: ["metadata", "namespace"], message: "must be a string, got 7" }],
    "the schema's",
  );
  for (const bad of ["-a", "a-", "A", "a_b", "a".repeat(64)]) {
    const { policy, issues } = compile(spec, { name: "x", namespace: bad });
    assert.equal(policy, undefined, String(bad));
    assert.deepEqual(issues, [{ path: ["metadata", "namespace"], message: `must be a namespace name (a lowercase DNS label), got ${JSON.stringify(bad)}` }]);
  }
});

test("a selector's problems are named at spec.match.<any|all>.<i>.resources.selector: the schema's, then the compiler's", () => {
  const selecting = (selector: unknown) =>
    compile({ exceptions: [{ policyName: "p" }], match: { all: [{ resources: { kinds: ["Pod"] } }, { resources: { selector } }] } });
  const at = "spec.match.all.1.resources.selector";
  const problems = (selector: unknown) => {
    const { policy, issues } = selecting(selector);
    assert.equal(policy, undefined);
    return issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  };
  assert.deepEqual(problems({ matchExpressions: [{ key: "team", operator: "in", values: ["a"] }] }), [
    `${at}.matchExpressions.0.operator: must be one of "In", "NotIn", "Exists", "DoesNotExist", got "in"`,
  ]);
  assert.deepEqual(problems({ matchExpressions: [{ key: "-team", operator: "In" }] }), [
    `${at}.matchExpressions.0.key: "-team" is not a label key: its name must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
    `${at}.matchExpressions.0.values: operator In needs at least one value`,
  ]);
  assert.deepEqual(problems({ matchExpressions: [{ key: "team", operator: "Exists", values: ["a"] }] }), [
    `${at}.matchExpressions.0.values: operator Exists takes no values`,
  ]);
  assert.deepEqual(selecting({ matchExpressions: [{ key: "team", operator: "NotIn", values: ["a"] }] }).policy?.match.all?.[1]?.selector, {
    matchExpressions: [{ key: "team", operator: "NotIn", values: ["a"] }],
  });
});

test("every schema problem is reported, an unknown field with the fields meant, and the request-level policy at its path", () => {
  const { policy, issues } = compile({ exceptions: [{ policyName: "p", ruleName: ["x"] }], match: { any: [{ resources: {} }] } });
  assert.equal(policy, undefined);
  assert.deepEqual(
    issues.map((i) => i.path.join(".")),
    ["spec.exceptions.0.ruleName", "spec.match.any.0.resources"],
  );
  assert.equal(issues[0]!.message, 'unknown field "ruleName"; known fields: policyName, kind, ruleNames; did you mean "ruleNames"?');
  const request = compile({ exceptions: [{ policyName: "p" }, { policyName: "imprimatur" }], ...anyPod });
  assert.equal(request.policy, undefined);
  assert.deepEqual(
    request.issues.map((i) => i.path),
    [["spec", "exceptions", 1, "policyName"]],
  );
});
