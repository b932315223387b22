// A webhook backend's answers read into decisions, and its failures into coded BackendUnavailableErrors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BackendUnavailableError } from "../../src/backends/backend.ts";
import { interpretStatus } from "../../src/backends/webhook-backend.ts";
import { ImprimaturError } from "../../src/errors/imprimatur-error.ts";

test("an answer that is not an ImageReview status is a bad-response, not retried", () => {
  for (const text of ["<html>", "{}", '{"status": {"allowed": "yes"}}', "null"]) {
    assert.throws(
      () => interpretStatus("scan", text),
      (e: unknown) => e instanceof BackendUnavailableError && e instanceof ImprimaturError && e.code === "bad-response" && !e.retryable,
      text,
    );
  }
});

test("a malformed answer says what is wrong with it, as an answer", () => {
  assert.throws(() => interpretStatus("scan", "<html>"), { code: "bad-response", message: "the answer is not JSON" });
  assert.throws(() => interpretStatus("scan", "{}"), { code: "bad-response", message: "the answer has no status.allowed boolean" });
});

test("codes carry their default retryability; a status says whether it is worth another attempt", () => {
  assert.equal(new BackendUnavailableError("unreachable", "ECONNREFUSED").retryable, true);
  assert.equal(new BackendUnavailableError("timeout", "timed out").retryable, true);
  const throttled = new BackendUnavailableError("http-status", "HTTP 429: slow down", { retryable: true, status: 429 });
  assert.deepEqual([throttled.name, throttled.code, throttled.status, throttled.retryable], ["BackendUnavailableError", "http-status", 429, true]);
  assert.equal(new BackendUnavailableError("http-status", "HTTP 400").retryable, false);
});

test("an allowed or denied status becomes a decision with the backend's audit annotations", () => {
  const allowed = interpretStatus("scan", JSON.stringify({ status: { allowed: true, auditAnnotations: { scanned: "yes", n: 1 } } }));
  assert.equal(allowed.allowed, true);
  assert.deepEqual(allowed.auditAnnotations, { "backend.scan.scanned": "yes" });
  const denied = interpretStatus("scan", JSON.stringify({ status: { allowed: false, reason: "CVE-2024-0001" } }));
  assert.equal(denied.allowed, false);
  assert.equal(denied.violations[0]?.message, "CVE-2024-0001");
});
