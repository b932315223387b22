// The token cache at its edges: every secret field alone makes a credential non-anonymous and tells it apart,
// a token whose cache lifetime ends the moment it arrives is refused, and the bound drops expired tokens before
// live ones and counts a refreshed token as new.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ANONYMOUS_IDENTITY, TokenCache, credentialIdentity, type TokenKey } from "../../../src/registry/token-cache.ts";

const FIELDS = ["username", "password", "identityToken", "registryToken"] as const;

test("any one secret field makes a credential non-anonymous, and its value alone tells two credentials apart", () => {
  for (const field of FIELDS) {
    const only = credentialIdentity({ source: "s", [field]: "v" });
    assert.notEqual(only, ANONYMOUS_IDENTITY, `${field} alone`);
    assert.notEqual(credentialIdentity({ source: "s", [field]: "other" }), only, `${field} alone, another value`);
    // The same field changing beside the others: a token of one credential never goes to the other.
    const full = { source: "s", username: "u", password: "p", identityToken: "i", registryToken: "r" };
    assert.notEqual(credentialIdentity({ ...full, [field]: "changed" }), credentialIdentity(full), `${field} among others`);
  }
  // A username with no password still is not anonymous access (and neither is a password alone).
  assert.notEqual(credentialIdentity({ source: "s", username: "u" }), credentialIdentity({ source: "s", password: "u" }));
});

const key = (identity: string): TokenKey => ({ realm: "https://auth/token", service: "reg", scope: "repository:team/app:pull", identity });

test("a token whose cache lifetime ends exactly on arrival is refused and not served", () => {
  const now = 1_000_000;
  const cache = new TokenCache({ now: () => now });
  // issued 50 s ago with 60 s: served until issued + 60 s - 10 s margin = now.
  assert.equal(cache.set(key("a"), { token: "t", expiresInS: 60, issuedAtMs: now - 50_000 }), false);
  assert.equal(cache.size, 0);
  assert.equal(cache.set(key("a"), { token: "t", expiresInS: 60, issuedAtMs: now - 49_999 }), true);
});

test("a refreshed token counts as the newest: the bound drops the older ones first", () => {
  const cache = new TokenCache({ maxEntries: 2 });
  cache.set(key("a"), { token: "a1" });
  cache.set(key("b"), { token: "b1" });
  cache.set(key("a"), { token: "a2" });
  cache.set(key("c"), { token: "c1" });
  assert.equal(cache.get(key("a")), "a2");
  assert.equal(cache.get(key("b")), undefined);
  assert.equal(cache.get(key("c")), "c1");
});

test("the bound drops expired tokens before live ones, including one that expires this very moment", () => {
  let now = 0;
  const cache = new TokenCache({ now: () => now, maxEntries: 2 });
  cache.set(key("live"), { token: "live", expiresInS: 3600 });
  cache.set(key("short"), { token: "short", expiresInS: 60 }); // served until 50 s
  now = 50_000;
  cache.set(key("new"), { token: "new", expiresInS: 3600 });
  assert.equal(cache.size, 2);
  assert.equal(cache.get(key("live")), "live");
  assert.equal(cache.get(key("new")), "new");
});

test("below the bound nothing is evicted, not even expired tokens (they go when asked for)", () => {
  let now = 0;
  const cache = new TokenCache({ now: () => now, maxEntries: 2 });
  cache.set(key("short"), { token: "short", expiresInS: 60 });
  now = 60_000;
  cache.set(key("b"), { token: "b" });
  assert.equal(cache.size, 2);
  assert.equal(cache.get(key("short")), undefined);
  assert.equal(cache.size, 1);
});

test("dropping a token the cache does not hold is a no-op", () => {
  const cache = new TokenCache();
  cache.delete(key("a"), "t");
  cache.set(key("b"), { token: "b" });
  cache.delete(key("a"), "b");
  assert.equal(cache.get(key("b")), "b");
});
