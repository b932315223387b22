import { test } from "node:test";
import assert from "node:assert/strict";
import { ANONYMOUS_IDENTITY, TokenCache, cacheUntil, credentialIdentity, type TokenKey } from "../../../src/registry/token-cache.ts";

const alice = { source: "secret a/one", username: "alice", password: "s3cret-password" };

test("credential identity: anonymous without secrets, a keyed hash otherwise, never the secret itself", () => {
  assert.equal(credentialIdentity(undefined), ANONYMOUS_IDENTITY);
  assert.equal(credentialIdentity({ source: "empty" }), ANONYMOUS_IDENTITY);
  const id = credentialIdentity(alice);
  assert.match(id, /^hmac:[0-9a-f]{64}$/);
  assert.ok(!id.includes("alice") && !id.includes("s3cret"));
  // Same secrets from another source share an identity; any secret field changing gives another one.
  assert.equal(credentialIdentity({ ...alice, source: "authfile" }), id);
  assert.notEqual(credentialIdentity({ ...alice, password: "other" }), id);
  assert.notEqual(credentialIdentity({ source: "x", identityToken: "t" }), credentialIdentity({ source: "x", registryToken: "t" }));
  // Field boundaries matter: "a:b"+"c" is not "a"+"b:c".
  assert.notEqual(credentialIdentity({ source: "x", username: "a:b", password: "c" }), credentialIdentity({ source: "x", username: "a", password: "b:c" }));
});

const key = (identity: string, scope = "repository:team/app:pull"): TokenKey => ({ realm: "https://auth/token", service: "reg", scope, identity });

test("a token is served until shortly before it expires (injected clock)", () => {
  let now = 1_000_000;
  const cache = new TokenCache({ now: () => now });
  assert.equal(cache.set(key("a"), { token: "t1", expiresInS: 300 }), true);
  now += 289_000;
  assert.equal(cache.get(key("a")), "t1");
  now += 1_000; // 290 s: within the 10 s margin
  assert.equal(cache.get(key("a")), undefined);
  assert.equal(cache.size, 0);
});

test("the default lifetime is 60 s; issued_at counts from when the token service issued it", () => {
  assert.equal(cacheUntil({ token: "t" }, 0), 50_000);
  assert.equal(cacheUntil({ token: "t", expiresInS: 60, issuedAtMs: -20_000 }, 0), 30_000);
  // An issued_at in the future (a fast token-service clock) does not stretch the lifetime.
  assert.equal(cacheUntil({ token: "t", expiresInS: 60, issuedAtMs: 120_000 }, 0), 50_000);
  // A lifetime within the margin keeps half of it.
  assert.equal(cacheUntil({ token: "t", expiresInS: 4 }, 0), 2_000);
  // An hour at most, however long the token service says: 1e308 s is not "forever".
  assert.equal(cacheUntil({ token: "t", expiresInS: 3600 }, 0), 3_590_000);
  assert.equal(cacheUntil({ token: "t", expiresInS: 1e308 }, 0), 3_590_000);
  assert.equal(cacheUntil({ token: "t", expiresInS: 86_400 * 365 }, 0), 3_590_000);
});

test("a token already expired on arrival is not cached", () => {
  const cache = new TokenCache({ now: () => 100_000 });
  assert.equal(cache.set(key("a"), { token: "old", expiresInS: 60, issuedAtMs: 0 }), false);
  assert.equal(cache.get(key("a")), undefined);
});

test("tokens are kept apart by identity and scope", () => {
  const cache = new TokenCache();
  cache.set(key("a"), { token: "for-a" });
  assert.equal(cache.get(key("b")), undefined);
  assert.equal(cache.get(key(ANONYMOUS_IDENTITY)), undefined);
  assert.equal(cache.get(key("a", "repository:other:pull")), undefined);
  assert.equal(cache.get({ ...key("a"), service: undefined }), undefined);
  assert.equal(cache.get(key("a")), "for-a");
});

test("delete drops only the token it was asked to drop", () => {
  const cache = new TokenCache();
  cache.set(key("a"), { token: "new" });
  cache.delete(key("a"), "old");
  assert.equal(cache.get(key("a")), "new");
  cache.delete(key("a"), "new");
  assert.equal(cache.get(key("a")), undefined);
});

test("the cache is bounded: the oldest entries go first", () => {
  const cache = new TokenCache({ maxEntries: 2 });
  cache.set(key("a"), { token: "1" });
  cache.set(key("b"), { token: "2" });
  cache.set(key("c"), { token: "3" });
  assert.equal(cache.size, 2);
  assert.equal(cache.get(key("a")), undefined);
  assert.equal(cache.get(key("c")), "3");
});
