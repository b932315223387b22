// Break-glass (src/core/break-glass.ts) through image-policy evaluation: what it never sets aside (invalid
// references, policies whose applicability cannot be decided) and annotations that only look given.
import assert from "node:assert/strict";
import { test } from "node:test";
import { applyBreakGlass, BREAK_GLASS_REASON, BREAK_GLASS_TICKET } from "../../src/core/break-glass.ts";
import { deny } from "../../src/core/decision.ts";
import { evaluateImagePolicies } from "../../src/core/image-policy/image-policy.ts";
import { imagePolicies } from "../support/image-policies.ts";

const overridable = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
  breakGlass: {allowed: true, requiredAnnotations: [break-glass.image-policy.k8s.io/approver]}
`);

const selected = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-only}
spec:
  namespaceSelector: {matchLabels: {env: prod}}
  rules: [{action: deny, images: ["docker.io/*"]}]
  default: allow
  breakGlass: {allowed: true}
`);

const GIVEN = { [BREAK_GLASS_REASON]: "CVE hotfix", [BREAK_GLASS_TICKET]: "INC-42", "break-glass.image-policy.k8s.io/approver": "alice" };
const BLOCKED = "break-glass cannot override invalid image references or undecidable policies";

const request = (images: string[], annotations: Record<string, string>) => ({
  namespace: "team-a",
  annotations,
  images: images.map((image, i) => ({ image, field: `spec.containers[${i}].image` })),
});

test("a complete break-glass sets aside an overridable denial (the baseline the other tests depart from)", () => {
  const d = evaluateImagePolicies(overridable, request(["docker.io/evil:1"], GIVEN), {});
  assert.equal(d.allowed, true);
  assert.equal(d.auditAnnotations["break-glass"], "used");
});

test("break-glass never admits an invalid image reference, alone or next to an overridable denial", () => {
  for (const images of [["UPPER/case:1"], ["docker.io/evil:1", "UPPER/case:1"]]) {
    const d = evaluateImagePolicies(overridable, request(images, GIVEN), {});
    assert.equal(d.allowed, false, images.join(" "));
    assert.equal(d.breakGlass, undefined);
    assert.equal(d.auditAnnotations["break-glass"], "refused");
    assert.ok(d.violations.some((v) => v.rule === "imageReference" && v.image === "UPPER/case:1"));
    assert.ok(d.violations.some((v) => v.rule === "breakGlass" && v.message === BLOCKED));
  }
});

test("break-glass never admits past a policy whose applicability cannot be decided (namespace labels unknown)", () => {
  const d = evaluateImagePolicies([...selected, ...overridable], request(["docker.io/evil:1"], GIVEN), {});
  assert.equal(d.allowed, false);
  assert.equal(d.breakGlass, undefined);
  assert.ok(d.violations.some((v) => v.policy === "prod-only" && v.rule === "namespaceSelector"));
  assert.ok(d.violations.some((v) => v.rule === "breakGlass" && v.message === BLOCKED));
  const known = evaluateImagePolicies([...selected, ...overridable], request(["docker.io/evil:1"], GIVEN), { namespaceLabels: { env: "prod" } });
  assert.equal(known.allowed, true, "with the labels known, the same request is overridable");
});

test("the blocking rule holds in applyBreakGlass itself, with every annotation given", () => {
  const blocking = { policy: "imprimatur", rule: "imageReference", image: "UPPER/case:1", message: "invalid" };
  const d = applyBreakGlass(deny([blocking]), { annotations: GIVEN, namespace: "team-a", blocking: [blocking], denials: [] });
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => v.message),
    ["invalid", BLOCKED],
  );
});

test("annotations made of whitespace are not given: reason, ticket and extra required ones", () => {
  for (const key of [BREAK_GLASS_REASON, BREAK_GLASS_TICKET, "break-glass.image-policy.k8s.io/approver"]) {
    for (const blank of ["", " ", "   ", "\t", "\n ", "\u00a0"]) {
      const d = evaluateImagePolicies(overridable, request(["docker.io/evil:1"], { ...GIVEN, [key]: blank }), {});
      assert.equal(d.allowed, false, `${key}=${JSON.stringify(blank)}`);
      assert.equal(d.breakGlass, undefined);
      const bg = d.violations.find((v) => v.rule === "breakGlass");
      assert.match(bg?.message ?? "", new RegExp(`missing: ${key.replaceAll(".", "\\.")}$`));
    }
  }
});

test("given values are recorded without their surrounding whitespace", () => {
  const d = evaluateImagePolicies(
    overridable,
    request(["docker.io/evil:1"], { ...GIVEN, [BREAK_GLASS_REASON]: "  CVE hotfix \n", [BREAK_GLASS_TICKET]: " INC-42 " }),
    {},
  );
  assert.equal(d.allowed, true);
  assert.deepEqual([d.breakGlass?.reason, d.breakGlass?.ticket], ["CVE hotfix", "INC-42"]);
  assert.equal(d.auditAnnotations["break-glass-ticket"], "INC-42");
});
