// NamespacedPodRestriction and validationActions, tested inside the PodRestriction area (the engine and loader
// tests reach them too, through more code): how a namespaced document compiles (namespaced-pod-restriction.ts),
// how it is judged beside the cluster's composition (pod-restriction-decision.ts), a cluster document that
// names a namespace (pod-restriction-kind.ts), and validationActions on a policy and on a check
// (pod-restriction.ts): where they are allowed, which findings carry them, and what they do to the decision.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compileNamespacedPodRestriction } from "../../../src/core/pod-restriction/namespaced-pod-restriction.ts";
import { decidePodRestrictions } from "../../../src/core/pod-restriction/pod-restriction-decision.ts";
import { podRestrictionKind } from "../../../src/core/pod-restriction/pod-restriction-kind.ts";
import type { PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { PodRestrictionIndex } from "../../../src/core/pod-restriction/restriction-index.ts";
import { APP, compileRestriction, findingsFor, podUnder, restrictionOf } from "./edge-support.ts";

const cx = { source: { origin: "p.yaml" } };
const NO_PRIVILEGED = { containers: { securityContext: { privileged: { allowNil: true, require: false } } } };
const NO_HOST_NETWORK = { securityContext: { hostNetwork: { require: false } } };
const privileged = { containers: [{ ...APP, securityContext: { privileged: true } }] };
const hostNetwork = { hostNetwork: true, containers: [APP] };

function namespacedDoc(spec: unknown, metadata: Record<string, unknown> = { name: "hardening", namespace: "shop" }, extra = {}) {
  return { apiVersion: "imprimatur.dev/v1alpha1", kind: "NamespacedPodRestriction", metadata, spec, ...extra };
}

function namespaced(spec: unknown): PodRestriction {
  const r = compileNamespacedPodRestriction(namespacedDoc(spec), cx);
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

function cluster(name: string, spec: unknown, mode: "Accept" | "Drop" = "Drop"): PodRestriction {
  const r = podRestrictionKind.compile({ apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name }, binding: { mode }, spec }, cx);
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

const decide = (policies: PodRestriction[], spec: Record<string, unknown>, namespace = "shop") =>
  decidePodRestrictions(new PodRestrictionIndex(policies), podUnder(spec), namespace, {});

describe("NamespacedPodRestriction: compiling", () => {
  it("is a Drop policy named namespace/name, bound to its namespace only", () => {
    const p = namespaced({ spec: NO_PRIVILEGED });
    assert.equal(p.name, "shop/hardening");
    assert.equal(p.namespace, "shop");
    assert.equal(p.mode, "Drop");
    assert.deepEqual(p.namespaces, ["shop"]);
  });

  it("without a namespace, or with a binding, it is refused with the field", () => {
    const noNamespace = compileNamespacedPodRestriction(namespacedDoc({}, { name: "hardening" }), cx);
    assert.equal(noNamespace.policy, undefined);
    assert.deepEqual(
      noNamespace.issues.map((i) => i.path.join(".")),
      ["metadata.namespace"],
    );
    const bound = compileNamespacedPodRestriction(namespacedDoc({}, undefined, { binding: { mode: "Accept" } }), cx);
    assert.equal(bound.policy, undefined);
    assert.equal(bound.issues.length, 1);
    assert.deepEqual(bound.issues[0]!.path, ["binding"]);
    assert.match(bound.issues[0]!.message, /^a NamespacedPodRestriction cannot set binding: it applies only in its own namespace/);
    assert.match(bound.issues[0]!.message, /\(a PodRestriction can\)$/);
  });

  it("a spec that does not compile gives the PodRestriction's errors and no policy", () => {
    const r = compileNamespacedPodRestriction(namespacedDoc({ spec: { securityContext: { hostNetwork: { require: "no" } } } }), cx);
    assert.equal(r.policy, undefined);
    assert.equal(r.issues.length, 1);
    assert.deepEqual(r.issues[0]!.path, ["spec", "spec", "securityContext", "hostNetwork", "require"]);
  });
});

describe("a PodRestriction that names a namespace", () => {
  it("is refused, pointing at the namespaced kind", () => {
    const r = podRestrictionKind.compile(
      { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "p", namespace: "shop" }, spec: {} },
      cx,
    );
    assert.equal(r.policy, undefined);
    assert.equal(r.issues.length, 1);
    assert.deepEqual(r.issues[0]!.path, ["metadata", "namespace"]);
    assert.equal(
      r.issues[0]!.message,
      "a PodRestriction is cluster-wide and has no namespace; for a policy of one namespace write kind NamespacedPodRestriction",
    );
  });
});

describe("NamespacedPodRestriction: judged beside the cluster's composition", () => {
  it("a cluster Accept policy that accepts the pod does not exempt it from the namespace's policy", () => {
    const d = decide(
      [cluster("ops", { spec: { containers: { image: { registry: { allowed: ["registry.example.com"] } } } } }, "Accept"), namespaced({ spec: NO_PRIVILEGED })],
      privileged,
    );
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.kind, v.policy]),
      [["NamespacedPodRestriction", "shop/hardening"]],
    );
    assert.deepEqual(d.warnings, [], "the namespace's policies are not Accept policies: nothing to say why none accepted");
  });

  it("each policy is judged once: the cluster's Drop policy by the composition, the namespace's beside it", () => {
    const d = decide([cluster("no-host-network", { spec: NO_HOST_NETWORK }), namespaced({ spec: NO_PRIVILEGED })], {
      hostNetwork: true,
      containers: [{ ...APP, securityContext: { privileged: true } }],
    });
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.kind, v.policy, v.field]),
      [
        ["PodRestriction", "no-host-network", "spec.hostNetwork"],
        ["NamespacedPodRestriction", "shop/hardening", "spec.containers[0].securityContext.privileged"],
      ],
    );
    assert.deepEqual(d.warnings, []);
  });

  it("a pod only the cluster's policy denies is denied by it alone", () => {
    const d = decide([cluster("no-host-network", { spec: NO_HOST_NETWORK }), namespaced({ spec: NO_PRIVILEGED })], hostNetwork);
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.kind, v.policy]),
      [["PodRestriction", "no-host-network"]],
    );
    assert.deepEqual(
      d.passes?.map((p) => [p.kind, p.policy]),
      [["NamespacedPodRestriction", "shop/hardening"]],
    );
  });

  it("in another namespace only the cluster's policies apply", () => {
    const d = decide([namespaced({ spec: NO_PRIVILEGED })], privileged, "web");
    assert.equal(d.allowed, true);
    assert.deepEqual(d.violations, []);
  });
});

describe("validationActions on a PodRestriction", () => {
  const twoChecks = (policyActions?: string[], checkActions?: string[]) => ({
    ...(policyActions ? { validationActions: policyActions } : {}),
    checks: [
      { name: "privileged", ...(checkActions ? { validationActions: checkActions } : {}), spec: NO_PRIVILEGED },
      { name: "host-network", spec: NO_HOST_NETWORK },
    ],
  });
  const both = { hostNetwork: true, containers: [{ ...APP, securityContext: { privileged: true } }] };

  it("the policy's actions are kept and stamp every finding", () => {
    const p = restrictionOf(twoChecks(["Warn"]));
    assert.deepEqual(p.validationActions, ["Warn"]);
    assert.deepEqual(
      findingsFor(p, both).map((f) => [f.rule, f.actions]),
      [
        ["privileged", ["Warn"]],
        ["host-network", ["Warn"]],
      ],
    );
  });

  it("a check's actions take the place of the policy's for its findings only, and add no finding", () => {
    const p = restrictionOf(twoChecks(["Audit"], ["Deny"]));
    assert.deepEqual(p.checks[0]!.validationActions, ["Deny"]);
    assert.equal(p.checks[1]!.validationActions, undefined);
    assert.deepEqual(
      findingsFor(p, both).map((f) => [f.rule, f.actions]),
      [
        ["privileged", ["Deny"]],
        ["host-network", ["Audit"]],
      ],
    );
    const checkOnly = restrictionOf(twoChecks(undefined, ["Warn"]));
    assert.deepEqual(
      findingsFor(checkOnly, both).map((f) => [f.rule, f.actions]),
      [
        ["privileged", ["Warn"]],
        ["host-network", undefined],
      ],
    );
  });

  it("failures set to Warn or Audit only are the decision's advisories; the others deny", () => {
    const d = decide([restrictionOf(twoChecks(["Audit"], ["Deny"]))], both);
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.rule, v.actions]),
      [["privileged", ["Deny"]]],
    );
    assert.deepEqual(
      d.advisories?.map((v) => [v.kind, v.rule, v.actions]),
      [["PodRestriction", "host-network", ["Audit"]]],
    );
    const warned = decide([restrictionOf(twoChecks(["Warn"]))], both);
    assert.equal(warned.allowed, true);
    assert.deepEqual(warned.violations, []);
    assert.equal(warned.advisories?.length, 2);
    const clean = decide([restrictionOf(twoChecks(["Warn"]))], { containers: [APP] });
    assert.equal(clean.allowed, true);
    assert.equal(clean.advisories, undefined);
    assert.equal("advisories" in clean, false);
  });

  it("an Accept policy cannot have them, on the policy or on a check", () => {
    const accept = (spec: unknown) =>
      podRestrictionKind.compile(
        { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "p" }, binding: { mode: "Accept" }, spec },
        cx,
      );
    const onPolicy = accept({ validationActions: ["Warn"], spec: NO_HOST_NETWORK });
    assert.equal(onPolicy.policy, undefined);
    assert.deepEqual(
      onPolicy.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
      ["spec.validationActions: applies to failures of Drop policies; an Accept policy admits the pods it accepts and denies none"],
    );
    const onCheck = accept({ checks: [{ name: "c", validationActions: ["Audit"], spec: NO_HOST_NETWORK }] });
    assert.equal(onCheck.policy, undefined);
    assert.deepEqual(
      onCheck.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
      ["spec.checks.0.validationActions: applies to failures of Drop policies; an Accept policy admits the pods it accepts and denies none"],
    );
  });

  it("actions that do not compile are refused with the field", () => {
    for (const [spec, field] of [
      [twoChecks(["Deny", "Warn"]), "spec.validationActions"],
      [twoChecks(undefined, ["Audit", "Audit"]), "spec.checks.0.validationActions"],
    ] as const) {
      const r = compileRestriction(spec);
      assert.equal(r.policy, undefined);
      assert.equal(r.issues.length, 1, JSON.stringify(r.issues));
      assert.equal(r.issues[0]!.path.join("."), field);
    }
    assert.match(compileRestriction(twoChecks(["Deny", "Warn"])).issues[0]!.message, /cannot hold both Deny and Warn/);
    assert.equal(compileRestriction(twoChecks(undefined, ["Audit", "Audit"])).issues[0]!.message, "lists Audit twice");
  });
});
