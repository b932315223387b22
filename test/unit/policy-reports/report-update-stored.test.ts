// planReportWrite against stored reports as they really come back, and as they may be left by hand: keys in
// the apiserver's (alphabetical) order, fields someone edited, results or metadata of the wrong shape. What
// is compared decides whether a rescan writes; what is kept decides what the rewrite sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildWgPolicyReport } from "../../../src/core/policy-reports/policy-report-objects.ts";
import { planReportWrite, type StoredReport } from "../../../src/core/policy-reports/report-update.ts";
import type { ResourceScan, ScanResult } from "../../../src/core/policy-reports/resource-scan.ts";

const POD = { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f" };
const NODE = { apiVersion: "v1", kind: "Node", name: "node-a", uid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d" };
const result = (seconds: number, over: Partial<ScanResult> = {}): ScanResult => ({
  policy: "signed-images",
  rule: "prod",
  result: "fail",
  severity: "high",
  message: "no valid signature",
  timestamp: { seconds, nanos: 0 },
  properties: { image: "registry.example/web:1", digest: "sha256:" + "a".repeat(64), field: "spec.containers[0].image" },
  ...over,
});
const scan = (...results: ScanResult[]): ResourceScan => ({ resource: POD, results });

/** Every object's keys in reverse order, as a client other than the apiserver might write them. */
function keysReversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(keysReversed);
  if (typeof value !== "object" || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .reverse()
      .map((k) => [k, keysReversed((value as Record<string, unknown>)[k])]),
  );
}

function stored(report: object): StoredReport & { metadata: Record<string, unknown> } {
  const copy = JSON.parse(JSON.stringify(report)) as StoredReport & { metadata: Record<string, unknown> };
  copy.metadata = { ...copy.metadata, resourceVersion: "41" };
  return copy;
}

test("a rescan finding the same results later is unchanged whatever order the stored report's keys are in", () => {
  const first = buildWgPolicyReport(scan(result(100), result(100, { rule: "other", result: "pass" })));
  const again = buildWgPolicyReport(scan(result(200), result(200, { rule: "other", result: "pass" })));
  assert.deepEqual(planReportWrite(again, keysReversed(stored(first)) as StoredReport), { action: "unchanged" });
});

test("a report whose scope, summary or results were edited is rewritten", () => {
  const report = buildWgPolicyReport(scan(result(100)));
  const scope = stored(report);
  scope.scope = { ...report.scope, name: "web-1" };
  const summary = stored(report);
  summary.summary = { ...report.summary, fail: 0, pass: 1 };
  const results = stored(report);
  results.results = [{ ...report.results[0], message: "edited" }];
  for (const edited of [scope, summary, results]) {
    const plan = planReportWrite(report, edited);
    assert.ok(plan.action === "replace");
    assert.deepEqual(plan.body.scope, report.scope);
    assert.deepEqual(plan.body.summary, report.summary);
    assert.deepEqual(plan.body.results, report.results);
  }
});

test("stored results that are missing, null or hold malformed entries are replaced, without failing", () => {
  const report = buildWgPolicyReport(scan(result(300)));
  const malformed: unknown[] = [
    undefined,
    null,
    "results",
    [null, "text", 7, { ...report.results[0], timestamp: null }, { ...report.results[0], timestamp: undefined }],
  ];
  for (const results of malformed) {
    const old = stored(report);
    old.results = results;
    const plan = planReportWrite(report, old);
    assert.ok(plan.action === "replace", String(results));
    assert.deepEqual(plan.body.results, report.results);
  }
});

test("annotations kept on a rewrite are a map of strings; anything else is dropped, as is a resourceVersion that is no string", () => {
  const report = buildWgPolicyReport(scan(result(300)));
  const older = buildWgPolicyReport(scan(result(100, { message: "older finding" })));
  for (const annotations of [null, "note", 7, ["note"], { note: "yes", count: 2 }, { count: 2 }]) {
    const old = stored(older);
    old.metadata.annotations = annotations;
    old.metadata.resourceVersion = 41;
    const plan = planReportWrite(report, old);
    assert.ok(plan.action === "replace");
    assert.equal("annotations" in plan.body.metadata, false, JSON.stringify(annotations));
    assert.equal("resourceVersion" in plan.body.metadata, false);
  }
});

test("a squatted report of a cluster-scoped resource is reclaimed like a namespaced one, by the resource's UID", () => {
  const node = buildWgPolicyReport({ resource: NODE, results: [result(100)] });
  const kyverno = stored(node);
  kyverno.metadata.labels = { "app.kubernetes.io/managed-by": "kyverno" };
  const plan = planReportWrite(node, kyverno);
  assert.ok(plan.action === "reclaim");
  assert.deepEqual(plan.squatter, { managedBy: "kyverno", ownedByResource: true });
  assert.equal(plan.body.kind, "ClusterPolicyReport");
  assert.deepEqual(plan.body.metadata.labels, { "app.kubernetes.io/managed-by": "imprimatur" });
  const mine = stored(node);
  assert.deepEqual(planReportWrite(node, mine), { action: "unchanged" });
});
