// serve's background scan flags (src/scan/scan-flags.ts): the defaults, and each flag that cannot be used refused
// by code with a message naming it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { backgroundScanOptions } from "../../../src/scan/scan-flags.ts";

test("the scan is off without --background-scan, and on with the defaults", () => {
  assert.equal(backgroundScanOptions({}, undefined), undefined);
  assert.deepEqual(backgroundScanOptions({ "background-scan": true }, "imprimatur"), {
    reports: ["wgpolicyk8s"],
    podsPerSecond: 20,
    rescanIntervalMs: 3_600_000,
    lease: { namespace: "imprimatur", name: "imprimatur-scan" },
    excludeNamespaces: [],
    errorRetryMs: 30_000,
  });
  assert.deepEqual(backgroundScanOptions({ "background-scan": true, "scan-lease": "ns/scan-lease" }, undefined)?.lease, {
    namespace: "ns",
    name: "scan-lease",
  });
});

test("a flag that cannot be used is refused by code, naming the flag", () => {
  const on = { "background-scan": true };
  assert.throws(() => backgroundScanOptions({ "scan-rate": "5" }, undefined), {
    name: "ScanFlagError",
    code: "needs-background-scan",
    message: "--scan-rate needs --background-scan",
  });
  assert.throws(() => backgroundScanOptions({ "scan-exclude-namespace": ["kube-system"] }, undefined), {
    name: "ScanFlagError",
    code: "needs-background-scan",
    message: "--scan-exclude-namespace needs --background-scan",
  });
  for (const rate of ["0", "10001", "fast"])
    assert.throws(() => backgroundScanOptions({ ...on, "scan-rate": rate }, undefined), {
      name: "ScanFlagError",
      code: "invalid-rate",
      message: `--scan-rate must be a number of pods per second from 0 to 10000, got ${rate}`,
    });
  assert.throws(() => backgroundScanOptions({ ...on, "scan-interval": "30s" }, undefined), {
    name: "ScanFlagError",
    code: "invalid-duration",
    message: "--scan-interval must be a duration of at least 1m, got 30s",
  });
  assert.throws(() => backgroundScanOptions({ ...on, "scan-error-retry": "soon" }, undefined), {
    name: "ScanFlagError",
    code: "invalid-duration",
    message: "--scan-error-retry must be a duration of at least 1s, got soon",
  });
  assert.throws(() => backgroundScanOptions({ ...on, "scan-lease": "lease" }, undefined), {
    name: "ScanFlagError",
    code: "invalid-lease",
    message: "--scan-lease must be NAMESPACE/NAME, got lease",
  });
});
