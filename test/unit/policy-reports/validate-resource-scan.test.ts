// Every check a scan passes before it becomes a report, at its edges: what is refused (with invalid-scan and a
// message naming the resource and the field) and what, just inside the limits, is accepted.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildWgPolicyReport } from "../../../src/core/policy-reports/policy-report-objects.ts";
import type { ResourceScan, ScanResult } from "../../../src/core/policy-reports/resource-scan.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";

const POD = { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f" };
const NODE = { apiVersion: "v1", kind: "Node", name: "node-a", uid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d" };
/** 9999-12-31T23:59:59Z, the last second a Timestamp may hold. */
const LAST_SECOND = Date.parse("9999-12-31T23:59:59Z") / 1000;
const result = (over: Record<string, unknown> = {}): ScanResult =>
  ({ policy: "signed-images", rule: "prod", result: "fail", message: "no valid signature", timestamp: { seconds: 100, nanos: 0 }, ...over }) as ScanResult;
const onPod = (...results: ScanResult[]): ResourceScan => ({ resource: POD, results });
const withResource = (over: Record<string, unknown>): ResourceScan => ({ resource: { ...POD, ...over } as ResourceScan["resource"], results: [] });

function refuses(scan: ResourceScan, message: string): void {
  assert.throws(
    () => buildWgPolicyReport(scan),
    (e: unknown) => hasErrorCode(e, "invalid-scan") && e.message === message,
    message,
  );
}

test("a resource without apiVersion, kind, name or uid, or with a namespace that is no string, is refused", () => {
  refuses(withResource({ apiVersion: undefined }), "resource Pod/shop/web-0: resource.apiVersion is required");
  refuses(withResource({ name: undefined }), "resource Pod/shop/undefined: resource.name is required");
  refuses(withResource({ uid: 7 }), "resource Pod/shop/web-0: resource.uid is required");
  refuses(withResource({ namespace: 7 }), "resource Pod/7/web-0: resource.namespace must be a string");
  refuses({ resource: { ...NODE, kind: "" }, results: [] }, "resource /node-a: resource.kind is required");
});

test("the uid must be a DNS subdomain of at most 253 characters, as the report's name", () => {
  for (const uid of ["ABCD-1234", "abcd-1234-X", "abcd-", "-abcd", "a".repeat(254)]) {
    refuses(withResource({ uid }), `resource Pod/shop/web-0: resource.uid "${uid}" is not a Kubernetes UID`);
  }
  for (const uid of ["7", "a".repeat(253), "a.b-c"]) {
    assert.equal(buildWgPolicyReport(withResource({ uid })).metadata.name, uid);
  }
});

test("results that are not a list are refused", () => {
  refuses({ resource: NODE, results: undefined as never }, "resource Node/node-a: results must be a list");
});

test("each result needs a policy and a message, and its rule and category, when given, are strings", () => {
  refuses(onPod(result({ policy: undefined })), "resource Pod/shop/web-0: results[0].policy is required");
  refuses(onPod(result(), result({ rule: 3 })), "resource Pod/shop/web-0: results[1].rule must be a string");
  refuses(onPod(result({ category: ["a"] })), "resource Pod/shop/web-0: results[0].category must be a string");
  refuses(onPod(result({ message: undefined })), "resource Pod/shop/web-0: results[0].message must be a string");
  refuses(onPod(result({ severity: "urgent" })), 'resource Pod/shop/web-0: results[0].severity "urgent" is not one of critical, high, medium, low, info');
});

test("timestamps: whole seconds from the epoch to the end of year 9999, whole nanos below a second", () => {
  const seconds = "resource Pod/shop/web-0: results[0].timestamp.seconds must be a whole number of seconds since the epoch";
  const nanos = "resource Pod/shop/web-0: results[0].timestamp.nanos must be a whole number from 0 to 999999999";
  refuses(onPod(result({ timestamp: { seconds: -1, nanos: 0 } })), seconds);
  refuses(onPod(result({ timestamp: { seconds: LAST_SECOND + 1, nanos: 0 } })), seconds);
  refuses(onPod(result({ timestamp: { seconds: 1, nanos: -1 } })), nanos);
  refuses(onPod(result({ timestamp: { seconds: 1, nanos: 1.5 } })), nanos);
  refuses(onPod(result({ timestamp: { seconds: 1 } })), nanos);
  const edge = { seconds: LAST_SECOND, nanos: 999_999_999 };
  assert.deepEqual(buildWgPolicyReport(onPod(result({ timestamp: edge }))).results[0]?.timestamp, edge);
});

test("a property with an empty key is refused", () => {
  refuses(onPod(result({ properties: { "": "x" } })), "resource Pod/shop/web-0: results[0].properties has an empty key");
});
