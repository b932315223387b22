// Pod Security Admission through the one pipeline, offline: the namespace's pod-security.kubernetes.io labels pick
// what is enforced (Pods only), warned and audited, in PSA's own words; exemptions skip it; workload templates are
// warned about, never denied.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { subjectOfObject, type AdmissionSubject } from "../../../src/core/admission-subject.ts";
import { renderReason } from "../../../src/core/decision.ts";
import type { NamespaceLabelSource } from "../../../src/core/namespace-labels.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { podSecurityContext } from "../../../src/policy/pod-security-context.ts";
import { validateSubject } from "../../support/engine-review.ts";

const LABELS: Record<string, Record<string, string>> = {
  strict: { "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted" },
  warned: { "pod-security.kubernetes.io/warn": "baseline" },
  audited: { "pod-security.kubernetes.io/audit": "baseline" },
  plain: {},
};
const namespaces: NamespaceLabelSource = { labels: (ns) => LABELS[ns] };

async function engine(): Promise<Engine> {
  const parsed = parsePolicyText(
    "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: any}\nspec: {rules: [{action: allow, images: ['*']}]}\n",
    "p.yaml",
  );
  const cx = await podSecurityContext(undefined);
  return buildEngine({
    config: structuredClone(DEFAULT_SERVER_CONFIG),
    policies: parsed.policies,
    namespaces,
    offline: true,
    podSecurity: { ...cx, config: { ...cx.config, exemptions: { ...cx.config.exemptions, usernames: ["ops-bot"] } } },
  });
}

const privileged = { name: "app", image: "registry.example.com/app:1", securityContext: { privileged: true } };

function subject(kind: "Pod" | "Deployment", namespace: string, user?: string): AdmissionSubject {
  const spec = { containers: [privileged] };
  const obj =
    kind === "Pod"
      ? { apiVersion: "v1", kind, metadata: { name: "p", namespace }, spec }
      : { apiVersion: "apps/v1", kind, metadata: { name: "d", namespace }, spec: { template: { metadata: {}, spec } } };
  const plan = subjectOfObject(obj, {}, namespace, user ? { username: user, groups: ["system:authenticated"] } : undefined);
  assert.ok(plan.review);
  return plan.subject;
}

const validate = (e: Engine, s: AdmissionSubject) => validateSubject(e, s, { endpoint: "check", deadline: Date.now() + 10_000, dryRun: true });

test("enforce denies a Pod in PSA's words; no warning comes with the denial", async () => {
  const d = await validate(await engine(), subject("Pod", "strict"));
  assert.equal(d.allowed, false);
  assert.equal(renderReason(d.violations), 'violates PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)');
  assert.deepEqual(d.warnings, []);
  assert.equal(d.auditAnnotations["pod-security-enforce-policy"], "baseline:latest");
});

test("a Deployment's template is warned about at the warn level, never denied", async () => {
  const d = await validate(await engine(), subject("Deployment", "strict"));
  assert.equal(d.allowed, true);
  assert.equal(d.warnings.length, 1);
  assert.match(
    d.warnings[0]!,
    /^would violate PodSecurity "restricted:latest": privileged \(container "app" must not set securityContext\.privileged=true\), /,
  );
});

test("warn and audit admit: a warning, or the audit-violations annotation", async () => {
  const e = await engine();
  const warned = await validate(e, subject("Pod", "warned"));
  assert.equal(warned.allowed, true);
  assert.deepEqual(warned.warnings, ['would violate PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)']);
  const audited = await validate(e, subject("Pod", "audited"));
  assert.equal(audited.allowed, true);
  assert.deepEqual(audited.warnings, []);
  assert.equal(
    audited.auditAnnotations["pod-security-audit-violations"],
    'would violate PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)',
  );
  const plain = await validate(e, subject("Pod", "plain"));
  assert.equal(plain.allowed, true, "an unlabelled namespace is privileged by PSA's defaults");
});

test("an exempt user is not judged, and the exemption is recorded", async () => {
  const d = await validate(await engine(), subject("Pod", "strict", "ops-bot"));
  assert.equal(d.allowed, true);
  assert.equal(d.auditAnnotations["pod-security-exempt"], "user");
});

test("a namespace whose labels are unknown: a Pod is refused, as PSA refuses it", async () => {
  const d = await validate(await engine(), subject("Pod", "nowhere"));
  assert.equal(d.allowed, false);
  assert.equal(renderReason(d.violations), "failed to lookup namespace nowhere");
});
