// The one pipeline (src/engine/engine.ts), offline: every policy kind is asked, passes are recorded, long
// violation lists are capped, overrides are refused when they cannot be audited, and metrics go through the
// Recorder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { subjectOfObject, type AdmissionSubject } from "../../../src/core/admission-subject.ts";
import { renderReason, type Decision } from "../../../src/core/decision.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { profileSources, shippedProfiles } from "../../../src/policy/profiles.ts";
import type { AdmissionCall } from "../../../src/engine/admission-call.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { NO_RECORDER, type Recorder } from "../../../src/engine/recorder.ts";
import { validateSubject } from "../../support/engine-review.ts";

const POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
  breakGlass: {allowed: true}
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: no-privileged}
spec:
  spec:
    containers: [{securityContext: {privileged: {allowNil: true, require: false}}}]
`;

async function engine(recorder: Recorder = NO_RECORDER): Promise<Engine> {
  const parsed = parsePolicyText(POLICIES, "inline.yaml", { profiles: profileSources(await shippedProfiles()) });
  assert.deepEqual(parsed.errors, []);
  return buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true, recorder });
}

const call = (extra: Partial<AdmissionCall> = {}): AdmissionCall => ({ endpoint: "check", deadline: Date.now() + 10_000, dryRun: true, ...extra });

function subject(obj: Record<string, unknown>): AdmissionSubject {
  const plan = subjectOfObject(obj);
  assert.ok(plan.review, plan.review ? "" : plan.why);
  return plan.subject;
}

const deployment = (containers: object[], annotations: Record<string, string> = {}) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "web", namespace: "shop" },
  spec: { template: { metadata: { annotations }, spec: { containers } } },
});

test("a Deployment's template is judged by every kind: image policy and PodRestriction, with field paths", async () => {
  const e = await engine();
  const d = await validateSubject(e, subject(deployment([{ name: "a", image: "nginx:1.25", securityContext: { privileged: true } }])), call());
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => [v.kind ?? "ImagePolicy", v.policy, v.field]),
    [
      ["ImagePolicy", "trusted", "spec.template.spec.containers[0].image"],
      ["PodRestriction", "no-privileged", "spec.template.spec.containers[0].securityContext.privileged"],
    ],
  );
  assert.equal(d.auditAnnotations.decision, "denied");
});

test("what applied and passed is recorded", async () => {
  const e = await engine();
  const d = await validateSubject(e, subject(deployment([{ name: "a", image: "registry.example.com/app:1" }])), call());
  assert.equal(d.allowed, true);
  assert.deepEqual(d.passes, [
    { kind: "ImagePolicy", policy: "trusted", rule: "rules[0]", image: "registry.example.com/app:1", field: "spec.template.spec.containers[0].image" },
    { kind: "PodRestriction", policy: "no-privileged", rule: "all", field: "spec.template.spec" },
  ]);
});

test("a 10,000-container pod: the reason lists 20 violations and counts the rest", async () => {
  const e = await engine();
  const containers = Array.from({ length: 10_000 }, (_, i) => ({ name: `c${i}`, image: `nginx:${i}` }));
  const d: Decision = await validateSubject(e, subject({ apiVersion: "v1", kind: "Pod", metadata: { name: "big" }, spec: { containers } }), call());
  assert.equal(d.violations.length, 10_000);
  const reason = renderReason(d.violations);
  assert.equal(reason.split("; ").length, 21);
  assert.match(reason, /; … and 9,980 more$/);
  assert.ok(reason.length < 10_000, `reason is ${reason.length} characters`);
  assert.ok((d.auditAnnotations.reason ?? "").length < 10_000);
});

test("break-glass: a dry run is decided without a record; a real admission with no audit log to write to is denied", async () => {
  const e = await engine();
  const annotations = { "break-glass.image-policy.k8s.io/reason": "outage", "break-glass.image-policy.k8s.io/ticket": "INC-1" };
  const s = subject(deployment([{ name: "a", image: "nginx:1.25" }], annotations));
  const dry = await validateSubject(e, s, call({ dryRun: true }));
  assert.equal(dry.allowed, true);
  assert.equal(dry.breakGlass?.ticket, "INC-1");
  const real = await validateSubject(e, s, call({ endpoint: "validate", dryRun: false }));
  assert.equal(real.allowed, false);
  assert.match(renderReason(real.violations), /could not be recorded in the audit log/);
});

test("break-glass annotations that are not strings (a manifest checked offline) are not read: the denial stands", async () => {
  const e = await engine();
  const annotations = { "break-glass.image-policy.k8s.io/reason": 42, "break-glass.image-policy.k8s.io/ticket": 7 } as unknown as Record<string, string>;
  const d = await validateSubject(e, subject(deployment([{ name: "a", image: "nginx:1.25" }], annotations)), call({ dryRun: true }));
  assert.equal(d.allowed, false);
  assert.equal(d.breakGlass, undefined);
});

test("the Recorder sees each decision once, and setPolicies swaps the set", async () => {
  const seen: Array<[string, boolean | undefined]> = [];
  const e = await engine({ ...NO_RECORDER, decision: (endpoint, d) => seen.push([endpoint, d?.allowed]) });
  await validateSubject(e, subject(deployment([{ name: "a", image: "nginx:1.25" }])), call({ endpoint: "validate" }));
  assert.deepEqual(seen, [["validate", false]]);
  const none = parsePolicyText("", "empty.yaml");
  e.setPolicies(none.policies);
  assert.equal((await validateSubject(e, subject(deployment([{ name: "a", image: "nginx:1.25" }])), call())).allowed, true);
});
