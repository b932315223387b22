// One running pod judged by the one pipeline, offline: results in policy-report terms (fail for Deny and Audit,
// warn for Warn, drift as Imprimatur's own failure), judged at the running digests; and the audit CLI's rendering.
import { test } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { Engine } from "../../../src/engine/engine.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { auditPod } from "../../../src/scan/pod-audit.ts";
import { renderAuditText, summarizeAudits } from "../../../src/cli/audit.ts";

const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;

const POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: registries}
spec:
  rules:
    - {action: allow, images: ["registry.example.com/*@sha256:*"], validationActions: [Deny]}
    - {action: deny, images: ["registry.example.com/legacy/*"], message: legacy, validationActions: [Warn]}
    - {action: deny, images: ["registry.example.com/old/*"], message: old, validationActions: [Audit]}
  default: deny
  defaultMessage: only digests of registry.example.com
`;

async function engine(): Promise<Engine> {
  const parsed = parsePolicyText(POLICIES, "inline.yaml");
  assert.deepEqual(parsed.errors, []);
  return buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
}

const pod = (name: string, image: string, imageID?: string, annotations: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: "shop", uid: `uid-${name}`, annotations },
  spec: { containers: [{ name: "app", image }] },
  status: imageID ? { containerStatuses: [{ name: "app", imageID }] } : {},
});

const at = () => new Date(Date.UTC(2026, 10, 26, 3, 0, 0));

test("a tag is judged at the digest it runs: the rule on digests allows it, and a pod that passes has no result", async () => {
  const e = await engine();
  const running = await auditPod(e, pod("web", "registry.example.com/app:1.0", `registry.example.com/app@${D1}`), at);
  assert.deepEqual(running.results, []);
  assert.equal(running.denials, 0);
  assert.deepEqual(running.resource, { apiVersion: "v1", kind: "Pod", name: "web", namespace: "shop", uid: "uid-web" });
  const notStarted = await auditPod(e, pod("new", "registry.example.com/app:1.0"), at);
  assert.deepEqual(
    notStarted.results.map((r) => [r.policy, r.rule, r.result]),
    [["registries", "default", "fail"]],
    "with no running digest, the tag is judged as written",
  );
});

test("Deny and Audit failures are fail results, Warn ones warn results, with the image, field and running digest", async () => {
  const e = await engine();
  const denied = await auditPod(e, pod("a", "quay.io/app:1", `quay.io/app@${D1}`), at);
  assert.deepEqual(denied.results, [
    {
      policy: "registries",
      rule: "default",
      result: "fail",
      category: "ImagePolicy",
      message: "only digests of registry.example.com",
      timestamp: { seconds: Date.UTC(2026, 10, 26, 3, 0, 0) / 1000, nanos: 0 },
      properties: { image: `quay.io/app:1@${D1}`, field: "spec.containers[0].image", digest: D1, validationActions: "Deny" },
    },
  ]);
  assert.equal(denied.denials, 1);
  const warned = await auditPod(e, pod("b", "registry.example.com/legacy/app:1"), at);
  assert.deepEqual(
    warned.results.map((r) => [r.rule, r.result]),
    [["rules[1]", "warn"]],
  );
  assert.equal(warned.denials, 0);
  const audited = await auditPod(e, pod("c", "registry.example.com/old/app:1"), at);
  assert.deepEqual(
    audited.results.map((r) => [r.rule, r.result, r.properties?.validationActions]),
    [["rules[2]", "fail", "Audit"]],
  );
});

test("a running digest other than the one admission verified is Imprimatur's own failure", async () => {
  const e = await engine();
  const drifted = await auditPod(
    e,
    pod("d", "registry.example.com/app:1.0", `registry.example.com/app@${D2}`, {
      "imprimatur.dev/verified-images": JSON.stringify({ "registry.example.com/app:1.0": { digest: D1, signers: [] } }),
    }),
    at,
  );
  assert.deepEqual(
    drifted.results.map((r) => [r.policy, r.rule, r.result, r.properties?.expected, r.properties?.digest]),
    [["imprimatur", "runningDigest", "fail", D1, D2]],
  );
  assert.match(drifted.results[0]!.message, /not the digest admission verified/);
});

test("audit CLI text: one line per finding and a summary", async () => {
  const e = await engine();
  const audits = [
    await auditPod(e, pod("ok", "registry.example.com/app:1.0", `registry.example.com/app@${D1}`), at),
    await auditPod(e, pod("bad", "quay.io/app:1", `quay.io/app@${D1}`), at),
    await auditPod(e, pod("legacy", "registry.example.com/legacy/app:1"), at),
  ];
  assert.deepEqual(renderAuditText(audits).trimEnd().split("\n"), [
    `shop/bad: fail: registries default: only digests of registry.example.com (quay.io/app:1@${D1})`,
    "shop/legacy: warn: registries rules[1]: legacy (registry.example.com/legacy/app:1)",
    "3 pods: 1 passed, 1 failed, 1 warned",
  ]);
  assert.deepEqual(summarizeAudits(audits), { pods: 3, passed: 1, failed: 1, warned: 1, errors: 0 });
});
