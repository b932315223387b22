// The report builders: one scan in, a wgpolicyk8s.io/v1alpha2 or openreports.io/v1alpha1 report out, with the
// name, namespace, owner, scope, label, results and summary both formats define.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildOpenReport, buildPolicyReport, buildWgPolicyReport } from "../../../src/core/policy-reports/policy-report-objects.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { parseReportFormats, DEFAULT_REPORT_FORMATS } from "../../../src/core/policy-reports/report-formats.ts";
import { timestampOf, type ResourceScan, type ScanResult } from "../../../src/core/policy-reports/resource-scan.ts";

const POD = { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f" };
const NODE = { apiVersion: "v1", kind: "Node", name: "node-a", uid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d" };
const AT = { seconds: 1_790_000_000, nanos: 500_000_000 };

const fail = (over: Partial<ScanResult> = {}): ScanResult => ({
  policy: "signed-images",
  rule: "prod-registry",
  result: "fail",
  severity: "high",
  category: "Supply chain",
  message: "image registry.example/shop/web:1.2 has no valid signature",
  timestamp: AT,
  properties: { image: "registry.example/shop/web:1.2", digest: "sha256:" + "a".repeat(64), field: "spec.containers[0].image" },
  ...over,
});

test("a namespaced resource gets a PolicyReport named by its UID, in its namespace, owned by it", () => {
  const report = buildWgPolicyReport({ resource: POD, results: [fail()] });
  assert.equal(report.apiVersion, "wgpolicyk8s.io/v1alpha2");
  assert.equal(report.kind, "PolicyReport");
  assert.deepEqual(report.metadata, {
    name: POD.uid,
    namespace: "shop",
    labels: { "app.kubernetes.io/managed-by": "imprimatur" },
    ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: "web-0", uid: POD.uid }],
  });
  assert.deepEqual(report.scope, { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: POD.uid });
  assert.deepEqual(report.summary, { pass: 0, fail: 1, warn: 0, error: 0, skip: 0 });
  assert.deepEqual(report.results, [
    {
      source: "imprimatur",
      policy: "signed-images",
      rule: "prod-registry",
      result: "fail",
      scored: true,
      severity: "high",
      category: "Supply chain",
      message: "image registry.example/shop/web:1.2 has no valid signature",
      timestamp: { seconds: 1_790_000_000, nanos: 500_000_000 },
      properties: { digest: "sha256:" + "a".repeat(64), field: "spec.containers[0].image", image: "registry.example/shop/web:1.2" },
    },
  ]);
  assert.equal("source" in report, false, "wgpolicyk8s has no report-level source");
});

test("the owner reference claims neither controller nor blockOwnerDeletion, as Kyverno's per-resource reports", () => {
  const [owner] = buildWgPolicyReport({ resource: POD, results: [fail()] }).metadata.ownerReferences;
  assert.equal(owner?.controller, undefined);
  assert.equal(owner?.blockOwnerDeletion, undefined);
});

test("a cluster-scoped resource gets a ClusterPolicyReport / ClusterReport without a namespace", () => {
  const wg = buildWgPolicyReport({ resource: NODE, results: [fail()] });
  assert.equal(wg.kind, "ClusterPolicyReport");
  assert.equal("namespace" in wg.metadata, false);
  assert.equal("namespace" in wg.scope, false);
  const open = buildOpenReport({ resource: { ...NODE, namespace: "" }, results: [fail()] });
  assert.equal(open.kind, "ClusterReport");
  assert.equal("namespace" in open.metadata, false);
  assert.equal(open.metadata.name, NODE.uid);
});

test("the openreports Report carries the same body plus a report-level source", () => {
  const scan: ResourceScan = { resource: POD, results: [fail(), fail({ result: "pass", rule: "other", message: "signed" })] };
  const open = buildOpenReport(scan);
  const wg = buildWgPolicyReport(scan);
  assert.equal(open.apiVersion, "openreports.io/v1alpha1");
  assert.equal(open.kind, "Report");
  assert.equal(open.source, "imprimatur");
  assert.deepEqual(open.metadata, wg.metadata);
  assert.deepEqual(open.scope, wg.scope);
  assert.deepEqual(open.summary, wg.summary);
  assert.deepEqual(open.results, wg.results);
  assert.deepEqual(buildPolicyReport("openreports", scan), open);
  assert.deepEqual(buildPolicyReport("wgpolicyk8s", scan), wg);
});

test("the summary counts every outcome, and warn results are not scored", () => {
  const outcomes = ["pass", "pass", "fail", "warn", "error", "skip", "skip", "skip"] as const;
  const report = buildWgPolicyReport({ resource: POD, results: outcomes.map((result, i) => fail({ result, rule: `r${i}` })) });
  assert.deepEqual(report.summary, { pass: 2, fail: 1, warn: 1, error: 1, skip: 3 });
  assert.deepEqual(
    report.results.filter((r) => !r.scored).map((r) => r.result),
    ["warn"],
  );
});

test("results are sorted by policy, rule and outcome whatever order they came in, and duplicates are written once", () => {
  const results = [
    fail({ policy: "b", rule: "y" }),
    fail({ policy: "a", rule: "z" }),
    fail({ policy: "b", rule: "x", result: "pass" }),
    fail({ policy: "a", rule: "z", timestamp: { seconds: AT.seconds - 60, nanos: 0 } }),
  ];
  const forward = buildWgPolicyReport({ resource: POD, results });
  const backward = buildWgPolicyReport({ resource: POD, results: [...results].reverse() });
  assert.deepEqual(forward, backward);
  assert.deepEqual(
    forward.results.map((r) => `${r.policy}/${r.rule}`),
    ["a/z", "b/x", "b/y"],
  );
  assert.deepEqual(forward.results[0]?.timestamp, { seconds: AT.seconds - 60, nanos: 0 }, "the earliest finding of a duplicate stays");
  assert.equal(forward.summary.fail, 2);
});

test("empty optional fields are left out, as the formats' Go types omit them", () => {
  const [entry] = buildWgPolicyReport({ resource: POD, results: [{ policy: "p", result: "pass", message: "", timestamp: AT }] }).results;
  assert.deepEqual(entry, { source: "imprimatur", policy: "p", result: "pass", scored: true, message: "", timestamp: AT });
});

test("timestampOf gives seconds and nanos of a Date", () => {
  assert.deepEqual(timestampOf(new Date("2026-11-26T03:00:00.250Z")), { seconds: Date.parse("2026-11-26T03:00:00Z") / 1000, nanos: 250_000_000 });
  assert.deepEqual(timestampOf(new Date(0)), { seconds: 0, nanos: 0 });
});

test("a scan that breaks the formats' rules is refused with invalid-scan, naming the field", () => {
  const cases: Array<[ResourceScan, RegExp]> = [
    [{ resource: { ...POD, uid: "" }, results: [] }, /resource\.uid is required/],
    [{ resource: { ...POD, uid: "Not A UID" }, results: [] }, /is not a Kubernetes UID/],
    [{ resource: { ...POD, kind: "" }, results: [] }, /resource\.kind is required/],
    [{ resource: POD, results: [fail({ policy: "" })] }, /results\[0\]\.policy is required/],
    [{ resource: POD, results: [fail(), fail({ result: "denied" as never })] }, /results\[1\]\.result "denied" is not one of pass, fail, warn, error, skip/],
    [{ resource: POD, results: [fail({ severity: "urgent" as never })] }, /severity "urgent"/],
    [{ resource: POD, results: [fail({ timestamp: { seconds: 1.5, nanos: 0 } })] }, /timestamp\.seconds/],
    [{ resource: POD, results: [fail({ timestamp: { seconds: 1, nanos: 1_000_000_000 } })] }, /timestamp\.nanos/],
    [{ resource: POD, results: [fail({ properties: { image: 3 as never } })] }, /properties\.image must be a string/],
  ];
  for (const [scan, message] of cases) {
    assert.throws(
      () => buildWgPolicyReport(scan),
      (e: unknown) => hasErrorCode(e, "invalid-scan") && message.test(e.message),
      String(message),
    );
  }
});

test("the formats flag: one, the other, both, a list; the default is wgpolicyk8s; anything else is refused", () => {
  assert.deepEqual(DEFAULT_REPORT_FORMATS, ["wgpolicyk8s"]);
  assert.deepEqual(parseReportFormats("wgpolicyk8s"), ["wgpolicyk8s"]);
  assert.deepEqual(parseReportFormats("openreports"), ["openreports"]);
  assert.deepEqual(parseReportFormats("both"), ["wgpolicyk8s", "openreports"]);
  assert.deepEqual(parseReportFormats(" openreports , wgpolicyk8s,openreports"), ["wgpolicyk8s", "openreports"]);
  for (const bad of ["", " , ", "kyverno", "wgpolicyk8s,v1alpha2"]) {
    assert.throws(
      () => parseReportFormats(bad),
      (e: unknown) => hasErrorCode(e, "invalid-format"),
      bad,
    );
  }
});
