import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluateImagePolicies, type ImagePolicy } from "../../src/core/image-policy/image-policy.ts";
import { renderReason } from "../../src/core/decision.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";

function policies(yaml: string): ImagePolicy[] {
  const {
    policies: { ImagePolicy: imagePolicies },
    errors,
  } = parsePolicyText(yaml, "inline.yaml");
  assert.deepEqual(errors, []);
  return [...imagePolicies];
}

const trusted = policies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted-registries}
spec:
  namespaces: [team-a]
  rules:
    - {action: deny, images: ["*:latest"], message: "pin a version"}
    - {action: allow, images: ["registry.example.com/*"]}
  default: deny
  breakGlass: {allowed: true}
`);

const req = (images: string[], namespace = "team-a", annotations: Record<string, string> = {}) => ({
  namespace,
  annotations,
  images: images.map((image, i) => ({ image, field: `spec.containers[${i}].image` })),
});

test("first matching rule wins; default decides the rest", () => {
  const d = evaluateImagePolicies(trusted, req(["registry.example.com/app:1.0", "registry.example.com/app:latest", "docker.io/evil:1"]), {});
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => [v.image, v.rule, v.field]),
    [
      ["registry.example.com/app:latest", "rules[0]", "spec.containers[1].image"],
      ["docker.io/evil:1", "default", "spec.containers[2].image"],
    ],
  );
  assert.match(
    renderReason(d.violations),
    /image "registry.example.com\/app:latest" \(spec.containers\[1\].image\) denied by policy trusted-registries rules\[0\]: pin a version/,
  );
  assert.equal(d.auditAnnotations.decision, "denied");
});

test("an image with neither tag nor digest is treated as :latest", () => {
  const d = evaluateImagePolicies(trusted, req(["registry.example.com/app"]), {});
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]?.rule, "rules[0]");
});

test("policies apply only to their namespaces; no applicable policy admits", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-b"), {});
  assert.equal(d.allowed, true);
  assert.equal(d.auditAnnotations.policies, "none");
});

test("an invalid image reference is a denial with the grammar's reason, not an exception", () => {
  const d = evaluateImagePolicies(trusted, req(["Registry.Example.com/App:1"]), {});
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]?.rule, "imageReference");
  assert.match(d.violations[0]!.message, /Registry\.Example\.com\/App:1/);
});

const selected = policies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-only}
spec:
  namespaceSelector:
    matchLabels: {env: prod}
    matchExpressions: [{key: tier, operator: NotIn, values: [sandbox]}]
  rules: [{action: allow, images: ["registry.example.com/*"]}]
`);

test("namespaceSelector: matching labels apply the policy, others do not", () => {
  assert.equal(evaluateImagePolicies(selected, req(["nginx:1"], "x"), { namespaceLabels: { env: "prod" } }).allowed, false);
  assert.equal(evaluateImagePolicies(selected, req(["nginx:1"], "x"), { namespaceLabels: { env: "dev" } }).allowed, true);
  assert.equal(evaluateImagePolicies(selected, req(["nginx:1"], "x"), { namespaceLabels: { env: "prod", tier: "sandbox" } }).allowed, true);
});

test("namespaceSelector with unknown labels is an explicit denial, not a silent match", () => {
  const d = evaluateImagePolicies(selected, req(["registry.example.com/a:1"], "x"), {});
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]?.rule, "namespaceSelector");
  assert.match(d.violations[0]!.message, /labels of namespace "x" are unknown/);
});

test("every applicable policy must allow", () => {
  const both = [
    ...trusted,
    ...policies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: no-debug}
spec:
  rules: [{action: deny, images: ["registry.example.com/debug/*"], message: "no debug images"}]
  default: allow
`),
  ];
  const d = evaluateImagePolicies(both, req(["registry.example.com/debug/shell:1"]), {});
  assert.deepEqual(
    d.violations.map((v) => v.policy),
    ["no-debug"],
  );
});

const BG = {
  "break-glass.image-policy.k8s.io/reason": "CVE hotfix",
  "break-glass.image-policy.k8s.io/ticket": "INC-42",
};

test("break-glass with reason and ticket overrides a denial where the policy allows it", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-a", BG), {});
  assert.equal(d.allowed, true);
  assert.equal(d.breakGlass?.ticket, "INC-42");
  assert.equal(d.breakGlass?.overridden.length, 1);
  assert.equal(d.auditAnnotations["break-glass"], "used");
  assert.match(d.warnings[0]!, /break-glass override \(ticket INC-42\)/);
});

test("break-glass without a ticket is a denial explaining what is required", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-a", { "break-glass.image-policy.k8s.io/reason": "urgent" }), {});
  assert.equal(d.allowed, false);
  const bg = d.violations.find((v) => v.rule === "breakGlass");
  assert.match(bg!.message, /missing: break-glass.image-policy.k8s.io\/ticket/);
});

test("break-glass where the policy does not allow it is refused", () => {
  const strict = policies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: strict}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"]}]
`);
  const d = evaluateImagePolicies(strict, req(["docker.io/evil:1"], "team-a", BG), {});
  assert.equal(d.allowed, false);
  assert.match(d.violations.at(-1)!.message, /does not allow overrides in namespace "team-a"/);
  assert.equal(d.breakGlass, undefined);
});

test("break-glass enforces the ticket pattern and extra required annotations", () => {
  const p = policies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: ticketed}
spec:
  rules: []
  breakGlass:
    allowed: true
    ticketPattern: "^INC-[0-9]+$"
    requiredAnnotations: [break-glass.image-policy.k8s.io/approver]
`);
  const bad = evaluateImagePolicies(p, req(["nginx:1"], "ns", { ...BG, "break-glass.image-policy.k8s.io/ticket": "whatever" }), {});
  assert.equal(bad.allowed, false);
  assert.ok(bad.violations.some((v) => /does not match the required form/.test(v.message)));
  assert.ok(bad.violations.some((v) => /missing: break-glass.image-policy.k8s.io\/approver/.test(v.message)));
  const good = evaluateImagePolicies(p, req(["nginx:1"], "ns", { ...BG, "break-glass.image-policy.k8s.io/approver": "alice" }), {});
  assert.equal(good.allowed, true);
});

test("unrelated annotations never trigger an override", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-a", { "scanner.image-policy.k8s.io/verified": "true" }), {});
  assert.equal(d.allowed, false);
});
