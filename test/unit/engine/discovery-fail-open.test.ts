// A fail-open server whose registry stalls past the admission deadline while signatures are looked up: the
// engine admits, and the admission is visible as fail-open everywhere a later audit looks — the decision, the
// audit log record (with the reason) and the decisions metric — never as a plain admission or a verification.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { subjectOfObject } from "../../../src/core/admission-subject.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { createMetrics, prometheusRecorder } from "../../../src/server/metrics.ts";
import { FakeRegistry, testTls } from "../registry/fake-registry.ts";
import { validateSubject } from "../../support/engine-review.ts";

const pem = generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString();
const DIGEST = `sha256:${"c".repeat(64)}`;

async function stalledEngine(t: TestContext, failOpen: boolean) {
  // Accepts every request and never answers it.
  const registry = await FakeRegistry.start({ https: true, intercept: () => true });
  const { caPem } = await testTls();
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-fail-open-"));
  const parsed = parsePolicyText(
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed}
spec:
  rules: [{action: allow, images: ["${registry.host}/*"], attestors: [{entries: [{staticKey: {name: release, ignoreTlog: true, key: ${JSON.stringify(pem)}}}]}]}]
  default: deny
`,
    "signed.yaml",
  );
  assert.deepEqual(parsed.errors, []);
  const metrics = createMetrics();
  const engine = await buildEngine({
    config: { ...structuredClone(DEFAULT_SERVER_CONFIG), failOpen },
    policies: parsed.policies,
    registries: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]),
    auditLogPath: join(dir, "audit.log"),
    recorder: prometheusRecorder(metrics),
  });
  t.after(async () => {
    await registry.close(); // first: the engine's connections then end at once
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  });
  const plan = subjectOfObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "shop" },
    spec: { containers: [{ name: "app", image: `${registry.host}/team/app@${DIGEST}` }] },
  });
  assert.ok(plan.review);
  const validate = () => validateSubject(engine, plan.subject, { endpoint: "validate", deadline: Date.now() + 400, uid: "u1", dryRun: false });
  return { engine, registry, metrics, validate, auditLog: join(dir, "audit.log") };
}

test("fail-open: a discovery timeout admits with a fail-open decision, audit record and metric, each with the reason", async (t) => {
  const { metrics, validate, auditLog } = await stalledEngine(t, true);
  const started = Date.now();
  const d = await validate();
  assert.ok(Date.now() - started < 5_000, "answered near the deadline");
  assert.equal(d.allowed, true);
  assert.equal(d.auditAnnotations["fail-open"], "true");
  assert.equal(d.failOpen?.length, 1);
  assert.match(d.failOpen![0]!.backend, /^registry\//);
  assert.match(d.failOpen![0]!.error, /deadline|timeout|did not answer/);

  const records = (await readFile(auditLog, "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { event: string; uid?: string; backends: Array<{ backend: string; error: string }> });
  assert.deepEqual(
    records.map((r) => [r.event, r.uid]),
    [["fail-open", "u1"]],
  );
  assert.match(records[0]!.backends[0]!.error, /deadline|timeout|did not answer/);

  const text = await metrics.registry.metrics();
  assert.match(text, /imprimatur_decisions_total\{endpoint="validate",outcome="fail-open"\} 1/);
  assert.doesNotMatch(text, /imprimatur_decisions_total\{endpoint="validate",outcome="allowed"\}/);
  assert.match(text, /imprimatur_signature_verifications_seconds_count\{outcome="unavailable"\} 1/);
});

test("fail-closed: the same timeout denies, saying the signatures could not be checked", async (t) => {
  const { validate, metrics } = await stalledEngine(t, false);
  const d = await validate();
  assert.equal(d.allowed, false);
  assert.match(d.violations[0]!.message, /could not be checked: .*denied because the server fails closed/);
  assert.match(await metrics.registry.metrics(), /imprimatur_decisions_total\{endpoint="validate",outcome="denied"\} 1/);
});
