// validationActions (Deny, Warn, Audit) through the one pipeline, offline: per policy and per rule or check, for
// ImagePolicy and PodRestriction; Warn admits with a warning, Audit admits with the validation-failures audit
// annotation, Deny+Audit denies and annotates; break-glass sets aside only what denies; bad lists are refused.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { subjectOfObject, type AdmissionSubject } from "../../../src/core/admission-subject.ts";
import { compileValidationActions, VALIDATION_FAILURES_ANNOTATION } from "../../../src/core/validation-actions.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { profileSources, shippedProfiles } from "../../../src/policy/profiles.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { validateSubject } from "../../support/engine-review.ts";

async function engineOf(policies: string): Promise<Engine> {
  const parsed = parsePolicyText(policies, "inline.yaml", { profiles: profileSources(await shippedProfiles()) });
  assert.deepEqual(parsed.errors, []);
  return buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
}

async function loadErrors(policies: string): Promise<string[]> {
  const parsed = parsePolicyText(policies, "inline.yaml", { profiles: profileSources(await shippedProfiles()) });
  return parsed.errors.map((e) => `${e.path ?? ""}: ${e.message}`);
}

function pod(containers: object[], annotations: Record<string, string> = {}): AdmissionSubject {
  const plan = subjectOfObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "shop", annotations }, spec: { containers } });
  assert.ok(plan.review);
  return plan.subject;
}

const validate = (e: Engine, s: AdmissionSubject) => validateSubject(e, s, { endpoint: "check", deadline: Date.now() + 10_000, dryRun: true });

const imagePolicy = (actions: string, ruleActions = "") => `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted}
spec:
  ${actions ? `validationActions: ${actions}` : ""}
  rules:
    - {action: deny, images: ["*/*:latest", "*:latest"], message: pin a version ${ruleActions ? `, validationActions: ${ruleActions}` : ""}}
    - {action: allow, images: ["registry.example.com/*"]}
  default: deny
  breakGlass: {allowed: true}
`;

test("Warn admits, with the failure as a warning and as an advisory; nothing denies", async () => {
  const d = await validate(await engineOf(imagePolicy("[Warn]")), pod([{ name: "a", image: "nginx:latest" }]));
  assert.equal(d.allowed, true);
  assert.deepEqual(d.violations, []);
  assert.deepEqual(
    d.advisories?.map((v) => [v.policy, v.rule, v.actions]),
    [["trusted", "rules[0]", ["Warn"]]],
  );
  assert.ok(d.warnings.includes('image "nginx:latest" (spec.containers[0].image) violates policy trusted rules[0]: pin a version'), d.warnings.join("\n"));
  assert.equal(d.auditAnnotations[VALIDATION_FAILURES_ANNOTATION], undefined);
  assert.equal(d.auditAnnotations.decision, "allowed");
});

test("Audit admits and lists the failure in the validation-failures audit annotation, without a warning", async () => {
  const d = await validate(await engineOf(imagePolicy("[Audit]")), pod([{ name: "a", image: "docker.io/library/nginx:1.25" }]));
  assert.equal(d.allowed, true);
  assert.deepEqual(d.warnings, []);
  assert.ok("validation-failures" in d.auditAnnotations, "the key the audit log shows after the webhook's name");
  assert.deepEqual(JSON.parse(d.auditAnnotations[VALIDATION_FAILURES_ANNOTATION]!), [
    {
      message: "no rule of this policy allows this image",
      policy: "trusted",
      rule: "default",
      image: "docker.io/library/nginx:1.25",
      field: "spec.containers[0].image",
      validationActions: ["Audit"],
    },
  ]);
});

test("Deny with Audit denies and annotates; a rule's own actions take the place of the policy's", async () => {
  const e = await engineOf(imagePolicy("[Deny, Audit]", "[Warn]"));
  const latest = await validate(e, pod([{ name: "a", image: "nginx:latest" }]));
  assert.equal(latest.allowed, true, "rule[0] is Warn only");
  const other = await validate(e, pod([{ name: "a", image: "quay.io/app:1.0" }]));
  assert.equal(other.allowed, false);
  assert.deepEqual(
    other.violations.map((v) => [v.rule, v.actions]),
    [["default", ["Deny", "Audit"]]],
  );
  assert.equal(JSON.parse(other.auditAnnotations[VALIDATION_FAILURES_ANNOTATION]!)[0].rule, "default");
  assert.equal(other.auditAnnotations.decision, "denied");
});

test("one warned and one denied image: denied by the second only, warned about the first", async () => {
  const d = await validate(
    await engineOf(imagePolicy("", "[Warn]")),
    pod([
      { name: "a", image: "nginx:latest" },
      { name: "b", image: "quay.io/app:1.0" },
    ]),
  );
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => v.image),
    ["quay.io/app:1.0"],
  );
  assert.deepEqual(
    d.advisories?.map((v) => v.image),
    ["nginx:latest"],
  );
  assert.doesNotMatch(d.auditAnnotations.reason ?? "", /nginx/);
  assert.deepEqual(d.warnings, ['image "nginx:latest" (spec.containers[0].image) violates policy trusted rules[0]: pin a version']);
});

test("a long list of audited failures is capped in the annotation, with the number left out", async () => {
  const containers = Array.from({ length: 25 }, (_, i) => ({ name: `c${i}`, image: `quay.io/app:${i}` }));
  const d = await validate(await engineOf(imagePolicy("[Audit]")), pod(containers));
  assert.equal(d.allowed, true);
  const audited = JSON.parse(d.auditAnnotations[VALIDATION_FAILURES_ANNOTATION]!) as Array<{ message: string; image?: string }>;
  assert.equal(audited.length, 21);
  assert.equal(audited[19]!.image, "quay.io/app:19");
  assert.deepEqual(audited[20], { message: "… and 5 more failures" });
});

test("break-glass sets aside what denies; a warned failure stays a warning", async () => {
  const glass = { "break-glass.image-policy.k8s.io/reason": "outage", "break-glass.image-policy.k8s.io/ticket": "INC-1" };
  // Offline there is no audit log, so an override is refused: what matters is that the Warn failure is no denial.
  const d = await validate(await engineOf(imagePolicy("", "[Warn]")), pod([{ name: "a", image: "nginx:latest" }], glass));
  assert.equal(d.allowed, true);
  assert.equal(d.breakGlass, undefined, "nothing denied, so nothing was overridden");
  assert.equal(d.advisories?.length, 1);
});

const podRestriction = (policyActions: string, checkActions: string) => `
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: hardening}
spec:
  ${policyActions ? `validationActions: ${policyActions}` : ""}
  checks:
    - name: privileged
      ${checkActions ? `validationActions: ${checkActions}` : ""}
      spec:
        containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]
    - name: hostNetwork
      spec:
        securityContext: {hostNetwork: {require: false}}
`;

test("PodRestriction: a check's actions take the place of the policy's", async () => {
  const e = await engineOf(podRestriction("[Audit]", "[Deny]"));
  const priv = await validate(e, pod([{ name: "a", image: "x", securityContext: { privileged: true } }]));
  assert.equal(priv.allowed, false);
  assert.deepEqual(
    priv.violations.map((v) => [v.kind, v.rule, v.actions]),
    [["PodRestriction", "privileged", ["Deny"]]],
  );
  assert.equal(priv.advisories, undefined, "nothing only warned or audited");
  const hostNet = await validate(e, { ...pod([{ name: "a", image: "x" }]) });
  assert.equal(hostNet.allowed, true);
  const plan = subjectOfObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "shop" },
    spec: { hostNetwork: true, containers: [{ name: "a", image: "x" }] },
  });
  assert.ok(plan.review);
  const audited = await validate(e, plan.subject);
  assert.equal(audited.allowed, true);
  assert.deepEqual(
    audited.advisories?.map((v) => v.rule),
    ["hostNetwork"],
  );
  assert.deepEqual(
    JSON.parse(audited.auditAnnotations[VALIDATION_FAILURES_ANNOTATION]!).map((f: { kind: string; rule: string }) => [f.kind, f.rule]),
    [["PodRestriction", "hostNetwork"]],
  );
});

test("failures of two kinds set to Audit share one annotation", async () => {
  const e = await engineOf(`${imagePolicy("[Audit]")}---${podRestriction("[Audit]", "")}`);
  const d = await validate(e, pod([{ name: "a", image: "quay.io/app:1.0", securityContext: { privileged: true } }]));
  assert.equal(d.allowed, true);
  assert.deepEqual(
    JSON.parse(d.auditAnnotations[VALIDATION_FAILURES_ANNOTATION]!).map((f: { policy: string }) => f.policy),
    ["trusted", "hardening"],
  );
});

test("validationActions that are not a list of distinct actions, or Deny with Warn, are refused with the field", async () => {
  assert.deepEqual(await loadErrors(imagePolicy("[Deny, Warn]")), [
    "spec.validationActions: cannot hold both Deny and Warn (a denial already tells the user why; ValidatingAdmissionPolicy refuses the pair too)",
  ]);
  assert.deepEqual(await loadErrors(imagePolicy("[Audit, Audit]")), ["spec.validationActions: lists Audit twice"]);
  assert.match((await loadErrors(imagePolicy("[Enforce]"))).join("\n"), /validationActions/);
  assert.deepEqual(await loadErrors(podRestriction("[Enforce]", "")), ['spec.validationActions[0]: must be one of "Deny", "Warn", "Audit", got "Enforce"']);
  assert.deepEqual(await loadErrors(podRestriction("[Audit, Audit]", "")), ["spec.validationActions: lists Audit twice"]);
  assert.deepEqual(await loadErrors(podRestriction("Warn", "")), ['spec.validationActions: must be a list of "Deny", "Warn", "Audit", got "Warn"']);
  assert.match((await loadErrors(imagePolicy("", "[Warn, Deny]"))).join("\n"), /spec\.rules\[0\]\.validationActions: cannot hold both Deny and Warn/);
  assert.deepEqual(await loadErrors(podRestriction("", "[]")), [
    "spec.checks[0].validationActions: must not be empty; leave it out for the policy's validationActions",
  ]);
  const accept = `
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: ops}
binding: {mode: Accept}
spec:
  validationActions: [Warn]
  spec: {securityContext: {hostNetwork: {require: true}}}
`;
  assert.match((await loadErrors(accept)).join("\n"), /spec\.validationActions: applies to failures of Drop policies/);
});

test("compileValidationActions refuses what is not a non-empty list of known actions itself, whatever schema ran before", () => {
  // The kinds' schemas refuse these first; the compiler does not rely on it.
  for (const raw of [undefined, "Warn", {}, []])
    assert.deepEqual(compileValidationActions(raw), { error: "must be a non-empty list of Deny, Warn, Audit" }, JSON.stringify(raw));
  assert.deepEqual(compileValidationActions(["Audit", "Enforce"]), { error: 'must hold only Deny, Warn, Audit; got "Enforce"' });
  assert.deepEqual(compileValidationActions(["Warn", null]), { error: "must hold only Deny, Warn, Audit; got null" });
  assert.deepEqual(compileValidationActions(["Warn", "Audit"]), { actions: ["Warn", "Audit"] });
});
