// The results list and the formats flag in detail: which results count as the same finding, which time a
// duplicate keeps, where results without a rule or category sort, and the messages a bad flag value gets.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildWgPolicyReport } from "../../../src/core/policy-reports/policy-report-objects.ts";
import { parseReportFormats } from "../../../src/core/policy-reports/report-formats.ts";
import type { ResultTimestamp, ScanResult } from "../../../src/core/policy-reports/resource-scan.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";

const POD = { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f" };
const result = (over: Partial<ScanResult> = {}): ScanResult => ({
  policy: "signed-images",
  rule: "prod",
  result: "fail",
  message: "no valid signature",
  timestamp: { seconds: 100, nanos: 0 },
  ...over,
});
const results = (...scanResults: ScanResult[]) => buildWgPolicyReport({ resource: POD, results: scanResults }).results;
const at = (seconds: number, nanos: number): ResultTimestamp => ({ seconds, nanos });

test("results that differ only in severity or category are different findings, both written", () => {
  assert.deepEqual(
    results(result({ severity: "high" }), result({ severity: "low" })).map((r) => r.severity),
    ["high", "low"],
  );
  assert.deepEqual(
    results(result({ category: "Supply chain" }), result({ category: "Registry" })).map((r) => r.category),
    ["Registry", "Supply chain"],
  );
  const summary = buildWgPolicyReport({ resource: POD, results: [result({ severity: "high" }), result()] }).summary;
  assert.equal(summary.fail, 2);
});

test("a result without a rule sorts before the policy's rules, one without a category before those with one", () => {
  assert.deepEqual(
    results(result({ rule: "Audit" }), result({ rule: undefined })).map((r) => r.rule),
    [undefined, "Audit"],
  );
  assert.deepEqual(
    results(result({ category: "Audit" }), result({ category: undefined })).map((r) => r.category),
    [undefined, "Audit"],
  );
});

test("a duplicate keeps its earliest time: by seconds first, then by nanos", () => {
  for (const order of [1, -1]) {
    const bySeconds = [result({ timestamp: at(200, 0) }), result({ timestamp: at(100, 500) })];
    const byNanos = [result({ timestamp: at(100, 500) }), result({ timestamp: at(100, 200) })];
    if (order < 0) [bySeconds, byNanos].forEach((list) => list.reverse());
    assert.deepEqual(
      results(...bySeconds).map((r) => r.timestamp),
      [at(100, 500)],
    );
    assert.deepEqual(
      results(...byNanos).map((r) => r.timestamp),
      [at(100, 200)],
    );
  }
});

test("the formats flag ignores empty items, and a bad value's message says what to use", () => {
  assert.deepEqual(parseReportFormats("wgpolicyk8s,"), ["wgpolicyk8s"]);
  assert.deepEqual(parseReportFormats(", openreports ,,"), ["openreports"]);
  assert.throws(
    () => parseReportFormats(" , "),
    (e: unknown) => hasErrorCode(e, "invalid-format") && e.message === "no report format given: use wgpolicyk8s, openreports or both",
  );
  assert.throws(
    () => parseReportFormats("wgpolicyk8s,kyverno"),
    (e: unknown) => hasErrorCode(e, "invalid-format") && e.message === 'unknown report format "kyverno": use wgpolicyk8s, openreports or both',
  );
});

test("results that differ only in their properties are ordered by them, the properties taken in key order", () => {
  const app = result({ properties: { container: "app", image: "registry.example/web:2" } });
  const sidecar = result({ properties: { image: "registry.example/proxy:1", container: "sidecar" } });
  for (const list of [
    [app, sidecar],
    [sidecar, app],
  ]) {
    assert.deepEqual(
      results(...list).map((r) => r.properties?.container),
      ["app", "sidecar"],
    );
  }
});
