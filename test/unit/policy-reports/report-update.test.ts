// The writer's decision, pure: create, replace or leave alone. A rescan with the same findings writes nothing
// (even with new timestamps), a changed finding replaces the report with the resourceVersion read, and a report
// at the name that is not Imprimatur's (its label and an owner reference to the resource, both) is reclaimed whole.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildOpenReport, buildWgPolicyReport } from "../../../src/core/policy-reports/policy-report-objects.ts";
import { planReportWrite, type StoredReport } from "../../../src/core/policy-reports/report-update.ts";
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

test("labels, annotations and finalizers others added to Imprimatur's report are kept when it is rewritten", () => {
  const report = buildWgPolicyReport(scan(result(100)));
  const mine = stored(report);
  const theirs = stored(report, { annotations: { "example.com/seen": "yes" }, finalizers: ["example.com/keep"] }) as StoredReport & {
    metadata: Record<string, unknown>;
  };
  theirs.metadata.labels = { ...(mine.metadata?.labels as object), team: "shop" };
  assert.deepEqual(planReportWrite(report, theirs), { action: "unchanged" });
  const changed = buildWgPolicyReport(scan(result(100, { message: "changed" })));
  const plan = planReportWrite(changed, theirs);
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

test("a report at the name without both Imprimatur's label and an owner reference to the resource is reclaimed: nothing of it is kept", () => {
  const report = buildWgPolicyReport(scan(result(100)));
  const owner = report.metadata.ownerReferences;
  const cases: Array<[string, Record<string, unknown>, { managedBy: string | undefined; ownedByResource: boolean }]> = [
    [
      "another tool's label and an owner reference (as Kyverno writes)",
      { labels: { "app.kubernetes.io/managed-by": "kyverno" }, ownerReferences: owner },
      { managedBy: "kyverno", ownedByResource: true },
    ],
    [
      "Imprimatur's label without an owner reference",
      { labels: { "app.kubernetes.io/managed-by": "imprimatur" }, ownerReferences: [] },
      { managedBy: "imprimatur", ownedByResource: false },
    ],
    [
      "Imprimatur's label with an owner reference to another object",
      { labels: { "app.kubernetes.io/managed-by": "imprimatur" }, ownerReferences: [{ ...owner[0], uid: "0badc0de-0000-4000-8000-000000000000" }] },
      { managedBy: "imprimatur", ownedByResource: false },
    ],
    ["an owner reference and no label", { labels: {}, ownerReferences: owner }, { managedBy: undefined, ownedByResource: true }],
    ["neither", {}, { managedBy: undefined, ownedByResource: false }],
  ];
  for (const [what, metadata, squatter] of cases) {
    const squatted = stored(report, { annotations: { "tenant.example/note": "fine" }, finalizers: ["tenant.example/keep"] }) as StoredReport & {
      metadata: Record<string, unknown>;
    };
    delete squatted.metadata.labels;
    delete squatted.metadata.ownerReferences;
    Object.assign(squatted.metadata, metadata);
    squatted.summary = { pass: 1, fail: 0, warn: 0, error: 0, skip: 0 };
    squatted.results = [
      { source: "imprimatur", policy: "signed-images", rule: "prod", result: "pass", scored: true, message: "fine", timestamp: { seconds: 1, nanos: 0 } },
    ];
    const plan = planReportWrite(report, squatted);
    assert.equal(plan.action, "reclaim", what);
    assert.ok(plan.action === "reclaim");
    assert.deepEqual(plan.squatter, squatter, what);
    assert.deepEqual(
      plan.body,
      { ...report, metadata: { ...report.metadata, resourceVersion: "41" } },
      `${what}: Imprimatur's report, with only the resourceVersion read`,
    );
  }
  // The same findings under a squatter's name are still reclaimed, never "unchanged".
  const copied = stored(report) as StoredReport & { metadata: Record<string, unknown> };
  copied.metadata.ownerReferences = [];
  assert.equal(planReportWrite(report, copied).action, "reclaim");
});

test("labels that are not a map, or owner references that are not a list, make no report Imprimatur's", () => {
  const report = buildWgPolicyReport(scan(result(100)));
  for (const [labels, ownerReferences] of [
    ["app.kubernetes.io/managed-by=imprimatur", report.metadata.ownerReferences],
    [["imprimatur"], report.metadata.ownerReferences],
    [{ "app.kubernetes.io/managed-by": 1 }, report.metadata.ownerReferences],
    [report.metadata.labels, report.metadata.ownerReferences[0]],
    [report.metadata.labels, [null, "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f", { uid: 7 }]],
  ] as const) {
    const odd = stored(report) as StoredReport & { metadata: Record<string, unknown> };
    odd.metadata.labels = labels;
    odd.metadata.ownerReferences = ownerReferences;
    assert.equal(planReportWrite(report, odd).action, "reclaim", JSON.stringify([labels, ownerReferences]));
  }
  // Imprimatur's own report with an extra owner reference someone added is Imprimatur's, and the extra one goes.
  const extra = stored(report) as StoredReport & { metadata: Record<string, unknown> };
  extra.metadata.ownerReferences = [
    { apiVersion: "v1", kind: "ConfigMap", name: "x", uid: "0badc0de-0000-4000-8000-000000000000" },
    ...report.metadata.ownerReferences,
  ];
  const plan = planReportWrite(report, extra);
  assert.ok(plan.action === "replace");
  assert.deepEqual(plan.body.metadata.ownerReferences, report.metadata.ownerReferences);
});
