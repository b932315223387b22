import { test } from "node:test";
import assert from "node:assert/strict";
import { readTokenResponse } from "../../../src/registry/registry-auth.ts";

const read = (value: unknown) => readTokenResponse(Buffer.from(typeof value === "string" ? value : JSON.stringify(value)));

test("token responses: token or access_token, expires_in and issued_at when valid", () => {
  assert.deepEqual(read({ token: "t" }), { token: "t" });
  assert.deepEqual(read({ access_token: "a" }), { token: "a" });
  assert.deepEqual(read({ token: "", access_token: "a" }), { token: "a" });
  assert.deepEqual(read({ token: "t", expires_in: 300, issued_at: "2026-01-01T00:00:00Z" }), {
    token: "t",
    expiresInS: 300,
    issuedAtMs: Date.parse("2026-01-01T00:00:00Z"),
  });
  // Nonsense lifetimes and dates fall back to the defaults rather than caching forever.
  assert.deepEqual(read({ token: "t", expires_in: -5, issued_at: "yesterday" }), { token: "t" });
  assert.deepEqual(read({ token: "t", expires_in: "300" }), { token: "t" });
});

test("token responses without a token are explained", () => {
  assert.equal(read("<html>"), "a response that is not JSON");
  assert.equal(read("null"), "a response that is not a JSON object");
  assert.equal(read({ details: "no" }), "a response without a token (neither token nor access_token)");
});
