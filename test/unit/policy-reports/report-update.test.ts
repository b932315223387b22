// The writer's decision, pure: create, replace or leave alone. A rescan with the same findings writes nothing
// (even with new timestamps), a changed finding replaces the report with the resourceVersion read, and a report
// of the same name that another tool manages is never overwritten.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildOpenReport, buildWgPolicyReport } from "../../../src/core/policy-reports/policy-report-objects.ts";
import { planReportWrite, type StoredReport } from "../../../src/core/policy-reports/report-update.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import type { ResourceScan, ScanResult } from "../../../src/core/policy-reports/resource-scan.ts";

const POD = { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f" };
const result = (seconds: number, over: Partial<ScanResult> = {}): ScanResult => ({
  policy: "signed-images",
  rule: "prod",
  result: "fail",
  message: "no valid signature",
  timestamp: { seconds, nanos: 0 },
  properties: { image: "registry.example/web:1" },
  ...over,
});
const scan = (...results: ScanResult[]): ResourceScan => ({ resource: POD, results });

/** What the apiserver returns for a stored report: the object plus server-set metadata, keys in its own order. */
function stored(report: object, extra: Record<string, unknown> = {}): StoredReport {
  const copy = JSON.parse(JSON.stringify(report)) as StoredReport & { metadata: Record<string, unknown> };
  copy.metadata = { ...extra, resourceVersion: "41", uid: "report-uid", creationTimestamp: "2026-11-26T03:00:00Z", ...copy.metadata };
  return Object.fromEntries(Object.entries(copy).reverse()) as StoredReport;
}

test("no stored report: create the desired one", () => {
  const desired = buildWgPolicyReport(scan(result(100)));
  assert.deepEqual(planReportWrite(desired, undefined), { action: "create", body: desired });
});

test("the same findings found again, later: unchanged, in both formats", () => {
  for (const build of [buildWgPolicyReport, buildOpenReport]) {
    const first = build(scan(result(100), result(100, { rule: "other", result: "pass" })));
    const again = build(scan(result(200, { rule: "other", result: "pass" }), result(300)));
    assert.deepEqual(planReportWrite(again, stored(first)), { action: "unchanged" }, first.kind);
  }
});

test("a changed finding replaces the report, with the resourceVersion read and the first-found time of unchanged results", () => {
  const first = buildWgPolicyReport(scan(result(100), result(100, { rule: "other", result: "pass" })));
  const changed = buildWgPolicyReport(scan(result(300), result(300, { rule: "other", result: "fail", message: "now failing" })));
  const plan = planReportWrite(changed, stored(first));
  assert.equal(plan.action, "replace");
  assert.ok(plan.action === "replace");
  assert.equal(plan.body.metadata.resourceVersion, "41");
  assert.deepEqual(
    plan.body.results.map((r) => [r.rule, r.result, r.timestamp.seconds]),
    [
      ["other", "fail", 300],
      ["prod", "fail", 100],
    ],
  );
  assert.deepEqual(plan.body.summary, { pass: 0, fail: 2, warn: 0, error: 0, skip: 0 });
});

test("labels, annotations and finalizers others added are kept; a missing owner reference is restored", () => {
  const report = buildWgPolicyReport(scan(result(100)));
  const mine = stored(report);
  const theirs = stored(report, { annotations: { "example.com/seen": "yes" }, finalizers: ["example.com/keep"] }) as StoredReport & {
    metadata: Record<string, unknown>;
  };
  theirs.metadata.labels = { ...(mine.metadata?.labels as object), team: "shop" };
  assert.deepEqual(planReportWrite(report, theirs), { action: "unchanged" });
  theirs.metadata.ownerReferences = [];
  const plan = planReportWrite(report, theirs);
  assert.ok(plan.action === "replace");
  assert.deepEqual(plan.body.metadata.ownerReferences, report.metadata.ownerReferences);
  assert.deepEqual(plan.body.metadata.labels, { "app.kubernetes.io/managed-by": "imprimatur", team: "shop" });
  assert.deepEqual(plan.body.metadata.annotations, { "example.com/seen": "yes" });
  assert.deepEqual(plan.body.metadata.finalizers, ["example.com/keep"]);
});

test("openreports: a changed report-level source is rewritten", () => {
  const report = buildOpenReport(scan(result(100)));
  const old = stored(report);
  old.source = "someone-else";
  assert.equal(planReportWrite(report, old).action, "replace");
});

test("a report of the same name managed by another tool is left alone, with foreign-report", () => {
  const report = buildWgPolicyReport(scan(result(100)));
  const kyverno = stored(report);
  kyverno.metadata = { ...kyverno.metadata, labels: { "app.kubernetes.io/managed-by": "kyverno" } };
  assert.throws(
    () => planReportWrite(report, kyverno),
    (e: unknown) => hasErrorCode(e, "foreign-report") && /managed by "kyverno", not imprimatur/.test(e.message),
  );
  const unlabelled = stored(report);
  unlabelled.metadata = { ...unlabelled.metadata, labels: {} };
  assert.throws(
    () => planReportWrite(report, unlabelled),
    (e: unknown) => hasErrorCode(e, "foreign-report"),
  );
});
