// The one decision shape every kind returns (src/core/decision.ts): how a violation reads, how the kinds'
// decisions combine into the admission's (all must allow; nothing optional appears unless something filled it),
// how long lists are capped, and the failure policy's answer to a review the server sheds (src/core/overload.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { allow, capList, combineDecisions, deny, renderViolation, type Violation } from "../../../src/core/decision.ts";
import { overloadDecision } from "../../../src/core/overload.ts";

const violation = (extra: Partial<Violation> = {}): Violation => ({ policy: "trusted", rule: "rules[1]", message: "pin a version", ...extra });

test("allow and deny start with no violations, warnings or audit annotations of their own", () => {
  assert.deepEqual(allow(), { allowed: true, violations: [], warnings: [], auditAnnotations: {} });
  assert.deepEqual(deny([violation()]), { allowed: false, violations: [violation()], warnings: [], auditAnnotations: {} });
});

test("a violation reads as its image and field, its field alone, or the request", () => {
  assert.equal(
    renderViolation(violation({ image: "nginx:latest", field: "spec.containers[0].image" })),
    'image "nginx:latest" (spec.containers[0].image) denied by policy trusted rules[1]: pin a version',
  );
  assert.equal(renderViolation(violation({ image: "nginx:latest" })), 'image "nginx:latest" denied by policy trusted rules[1]: pin a version');
  assert.equal(
    renderViolation(violation({ field: "spec.hostNetwork", kind: "PodRestriction" }), "violates"),
    "spec.hostNetwork violates PodRestriction trusted rules[1]: pin a version",
  );
  assert.equal(renderViolation(violation()), "request denied by policy trusted rules[1]: pin a version");
});

test("combined decisions: every list kept in order, and the optional ones absent when no decision filled them", () => {
  assert.deepEqual(combineDecisions(allow(), allow({ warnings: ["w"] })), { allowed: true, violations: [], warnings: ["w"], auditAnnotations: {} });
  const patch = { op: "replace" as const, path: "/spec/containers/0/image", value: "nginx@sha256:" + "a".repeat(64) };
  const combined = combineDecisions(
    allow({ passes: [{ policy: "a", rule: "default" }], patches: [patch] }),
    allow({ advisories: [violation({ actions: ["Warn"] })], failOpen: [{ backend: "scanner", error: "timeout" }] }),
  );
  assert.deepEqual(combined, {
    allowed: true,
    violations: [],
    warnings: [],
    auditAnnotations: {},
    passes: [{ policy: "a", rule: "default" }],
    advisories: [violation({ actions: ["Warn"] })],
    failOpen: [{ backend: "scanner", error: "timeout" }],
    patches: [patch],
  });
});

test("a list is capped after its first entries, with the number left out; a short one is kept whole", () => {
  assert.deepEqual(capList([1, 2, 3], 5), { listed: [1, 2, 3], more: 0 });
  assert.deepEqual(capList([1, 2, 3], 3), { listed: [1, 2, 3], more: 0 });
  assert.deepEqual(capList([1, 2, 3, 4, 5], 3), { listed: [1, 2, 3], more: 2 });
});

test("a shed review is denied with the reason failing closed, and admitted with the fail-open trace failing open", () => {
  const reason = "the server is overloaded: 3 reviews in flight, the limit is 3";
  assert.deepEqual(overloadDecision(reason, false), {
    allowed: false,
    violations: [
      {
        policy: "imprimatur",
        rule: "overload",
        message: "the server is overloaded: 3 reviews in flight, the limit is 3; not judged, and denied because the server fails closed",
      },
    ],
    warnings: [],
    auditAnnotations: { decision: "denied" },
  });
  assert.deepEqual(overloadDecision(reason, true), {
    allowed: true,
    violations: [],
    warnings: ["admitted without being judged: the server is overloaded: 3 reviews in flight, the limit is 3; the server fails open"],
    auditAnnotations: { "fail-open": "true" },
    failOpen: [{ backend: "imprimatur/overload", error: reason }],
  });
});
