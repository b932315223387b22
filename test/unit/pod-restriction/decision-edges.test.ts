// Edges of decidePodRestrictions: the whole decision (annotations, passes, warnings) when only Accept
// policies are bound, when an Accept policy accepts, when it does not (the warning names its first finding
// and how many more), which Drop policies pass beside the violated ones, and the denial when a namespace's
// labels are unknown.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ACCEPTED_BY_ANNOTATION, decidePodRestrictions } from "../../../src/core/pod-restriction/pod-restriction-decision.ts";
import { compilePodRestriction, type PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";
import { PodRestrictionIndex } from "../../../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";

function policy(name: string, spec: unknown, binding?: unknown): PodRestriction {
  const raw: Record<string, unknown> = { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name }, spec };
  if (binding !== undefined) raw.binding = binding;
  const r = compilePodRestriction(raw);
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

function pod(spec: Record<string, unknown>): PodUnderReview {
  const [p] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "pod" }, spec });
  assert.ok(p);
  return p;
}

const ACCEPT = { mode: "Accept" };
const trustedImages = { spec: { containers: { image: { registry: { allowed: ["registry.example.com"] } } } } };
const namedApp = { spec: { containers: { name: { allowed: ["app"] }, imagePullPolicy: { allowed: ["Always"] } } } };
const noPrivileged = { spec: { containers: { securityContext: { privileged: { allowNil: true, require: false } } } } };
const noHostNetwork = { spec: { securityContext: { hostNetwork: { require: false } } } };

const trusted = { name: "app", image: "registry.example.com/app:1", imagePullPolicy: "Always" };
const hub = { name: "web", image: "nginx:1" };

describe("decidePodRestrictions edges", () => {
  it("only Accept policies bound: the pod is admitted with nothing to record, accepted or not", () => {
    const index = new PodRestrictionIndex([policy("trusted", trustedImages, ACCEPT)]);
    for (const containers of [[trusted], [hub]]) {
      assert.deepEqual(decidePodRestrictions(index, pod({ containers }), "default", {}), { allowed: true, violations: [], warnings: [], auditAnnotations: {} });
    }
  });

  it("an accepting Accept policy is recorded in the audit annotation and as a pass on the pod's spec", () => {
    const index = new PodRestrictionIndex([policy("trusted", trustedImages, ACCEPT), policy("no-privileged", noPrivileged)]);
    const d = decidePodRestrictions(index, pod({ containers: [{ ...trusted, securityContext: { privileged: true } }] }), "default", {});
    assert.deepEqual(d, {
      allowed: true,
      violations: [],
      warnings: [],
      auditAnnotations: { [ACCEPTED_BY_ANNOTATION]: "trusted" },
      passes: [{ kind: "PodRestriction", policy: "trusted", rule: "accept", field: "spec" }],
    });
  });

  it("the pass names the template's spec for a workload", () => {
    const [template] = podsInObject({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web" },
      spec: { template: { metadata: {}, spec: { containers: [trusted] } } },
    });
    assert.ok(template);
    const index = new PodRestrictionIndex([policy("trusted", trustedImages, ACCEPT), policy("no-privileged", noPrivileged)]);
    const d = decidePodRestrictions(index, template, "default", {});
    assert.deepEqual(d.passes, [{ kind: "PodRestriction", policy: "trusted", rule: "accept", field: "spec.template.spec" }]);
  });

  it("a pod whose spec has no field path is recorded against spec", () => {
    const bare: PodUnderReview = { ...pod({ containers: [trusted] }), spec: { value: { containers: [trusted] }, field: "" } };
    const index = new PodRestrictionIndex([policy("trusted", trustedImages, ACCEPT), policy("no-privileged", noPrivileged)]);
    assert.deepEqual(decidePodRestrictions(index, bare, "default", {}).passes, [{ kind: "PodRestriction", policy: "trusted", rule: "accept", field: "spec" }]);
    const dropOnly = new PodRestrictionIndex([policy("no-privileged", noPrivileged)]);
    assert.deepEqual(decidePodRestrictions(dropOnly, bare, "default", {}).passes, [
      { kind: "PodRestriction", policy: "no-privileged", rule: "all", field: "spec" },
    ]);
  });

  it("an Accept policy that does not accept warns with its first finding and how many more", () => {
    const index = new PodRestrictionIndex([policy("named", namedApp, ACCEPT), policy("trusted", trustedImages, ACCEPT), policy("no-privileged", noPrivileged)]);
    const d = decidePodRestrictions(index, pod({ containers: [{ ...hub, securityContext: { privileged: true } }] }), "default", {});
    assert.equal(d.allowed, false);
    assert.deepEqual(d.warnings, [
      'not accepted by PodRestriction named: spec.containers[0].name is "web"; allowed: "app" (and 1 more)',
      'not accepted by PodRestriction trusted: spec.containers[0].image (registry) is "docker.io"; allowed: "registry.example.com"',
    ]);
    assert.deepEqual(
      d.violations.map((v) => [v.policy, v.kind, v.field]),
      [["no-privileged", "PodRestriction", "spec.containers[0].securityContext.privileged"]],
    );
    assert.equal(d.passes, undefined);
  });

  it("a denial lists the Drop policies that passed beside the violated ones", () => {
    const index = new PodRestrictionIndex([policy("no-privileged", noPrivileged), policy("no-host-network", noHostNetwork)]);
    const d = decidePodRestrictions(index, pod({ hostNetwork: true, containers: [trusted] }), "default", {});
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.policy, v.field]),
      [["no-host-network", "spec.hostNetwork"]],
    );
    assert.deepEqual(d.passes, [{ kind: "PodRestriction", policy: "no-privileged", rule: "all", field: "spec" }]);
    assert.deepEqual(d.warnings, []);
  });

  it("admitted by Drop policies alone: every one is a pass", () => {
    const index = new PodRestrictionIndex([policy("no-privileged", noPrivileged), policy("no-host-network", noHostNetwork)]);
    const d = decidePodRestrictions(index, pod({ containers: [trusted] }), "default", {});
    assert.deepEqual(d, {
      allowed: true,
      violations: [],
      warnings: [],
      auditAnnotations: {},
      passes: [
        { kind: "PodRestriction", policy: "no-privileged", rule: "all", field: "spec" },
        { kind: "PodRestriction", policy: "no-host-network", rule: "all", field: "spec" },
      ],
    });
  });

  it("unknown namespace labels deny, naming the namespace, the selector and the remedy", () => {
    const index = new PodRestrictionIndex([policy("prod-only", noPrivileged, { namespaceSelector: { matchLabels: { tier: "prod" } } })]);
    const d = decidePodRestrictions(index, pod({ containers: [trusted] }), "team-a", undefined);
    assert.equal(d.allowed, false);
    assert.equal(d.violations.length, 1);
    const [v] = d.violations;
    assert.equal(v!.policy, "prod-only");
    assert.equal(v!.rule, "binding.namespaceSelector");
    assert.ok(v!.message.startsWith('the labels of namespace "team-a" are unknown'), v!.message);
    assert.ok(v!.message.includes("tier=prod"), v!.message);
    assert.ok(
      v!.message.endsWith(
        "give the labels: serve reads them through the Kubernetes API (--kubeconfig, or in a pod) or --namespaces FILE; check and test take --namespaces FILE or --namespace-labels NAMESPACE:KEY=VALUE, verify --namespace-labels",
      ),
      v!.message,
    );
  });
});
