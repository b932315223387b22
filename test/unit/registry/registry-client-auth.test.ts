// Registry authentication: Basic, Bearer tokens (anonymous, password, identity token, registry token), the
// token cache, credential order. The registry is the in-process FakeRegistry (see fake-registry.ts for why):
// these tests count requests per credential and move the token service's clock, which a real registry and
// its token service do not let a test do.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { CredentialLookup, RegistryCredential } from "../../../src/credentials/credential.ts";
import { RegistryClient, type RegistryClientOptions, type RoundTrip } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap, type RegistrySettings } from "../../../src/registry/registry-settings.ts";
import type { ServerResponse } from "node:http";
import { FakeRegistry, imageManifest, json, startServer, testTls, type FakeRegistryOptions } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const alice: RegistryCredential = { source: "secret team/alice", username: "alice", password: "alice-password" };
const bob: RegistryCredential = { source: "secret team/bob", username: "bob", password: "bob-password" };
const mallory: RegistryCredential = { source: "secret team/mallory", username: "alice", password: "wrong-password" };

async function setup(
  t: TestContext,
  registryOptions: FakeRegistryOptions,
  clientOptions: RegistryClientOptions = {},
  moreSettings: (registry: FakeRegistry) => RegistrySettings[] = () => [],
) {
  const registry = await FakeRegistry.start({
    https: true,
    users: { alice: { password: alice.password! }, bob: { password: bob.password! } },
    ...registryOptions,
  });
  const digest = registry.putManifest(REPO, "v1", imageManifest("v1"));
  const trips: RoundTrip[] = [];
  const { caPem } = await testTls();
  const client = new RegistryClient({
    settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }, ...moreSettings(registry)]),
    onRoundTrip: (trip) => trips.push(trip),
    ...clientOptions,
  });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, trips, digest, ref: { registry: registry.host, repository: REPO, tag: "v1" } };
}

test("Basic: the credential the lookup gives for the registry host and repository is sent", async (t) => {
  const asked: string[] = [];
  const { registry, client, digest, ref } = await setup(
    t,
    { auth: "basic" },
    {
      credentials: (host, repository) => {
        asked.push(`${host} ${repository}`);
        return [alice];
      },
    },
  );
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.digest, digest);
  assert.equal(resolved.credentialSource, "secret team/alice");
  assert.equal(resolved.endpoint, registry.host);
  assert.deepEqual(asked, [`${registry.host} ${REPO}`]);
  const manifestRequest = registry.registryRequests.at(-1)!;
  assert.equal(manifestRequest.authorization, "Basic " + Buffer.from("alice:alice-password").toString("base64"));
});

test("Bearer: a warm client reuses the ping and the token, one round trip per call", async (t) => {
  const { registry, client, trips, ref } = await setup(t, { auth: "bearer" }, { credentials: () => [alice] });
  await client.resolveDigest(ref);
  assert.deepEqual(
    trips.map((r) => `${r.method} ${new URL(r.url).pathname} ${r.status}`),
    ["GET /v2/ 401", "GET /token 200", `GET /v2/${REPO}/manifests/v1 200`],
  );
  const tokenRequest = registry.tokenRequests[0]!;
  const query = new URL(tokenRequest.url, "https://x").searchParams;
  assert.equal(query.get("service"), "fake-registry");
  assert.equal(query.get("scope"), `repository:${REPO}:pull`);
  assert.equal(tokenRequest.authorization, "Basic " + Buffer.from("alice:alice-password").toString("base64"));

  trips.length = 0;
  await client.resolveDigest(ref);
  await client.getManifest(ref);
  assert.deepEqual(
    trips.map((r) => `${r.method} ${new URL(r.url).pathname}`),
    [`GET /v2/${REPO}/manifests/v1`, `GET /v2/${REPO}/manifests/v1`],
  );
});

test("Bearer: token expiry is honoured (injected clock)", async (t) => {
  let now = Date.parse("2026-01-01T00:00:00Z");
  const clock = () => now;
  const { registry, client, ref } = await setup(t, { auth: "bearer", tokenNow: clock, tokenExpiresIn: 120 }, { credentials: () => [alice], now: clock });
  await client.resolveDigest(ref);
  now += 100_000;
  await client.resolveDigest(ref);
  assert.equal(registry.tokenRequests.length, 1, "a 120 s token is still good after 100 s");
  now += 10_000;
  await client.resolveDigest(ref);
  assert.equal(registry.tokenRequests.length, 2, "after 110 s the token is within the expiry margin and replaced");
});

test("Bearer: a public repository gets an anonymous token when no credential is configured", async (t) => {
  const { registry, client, ref } = await setup(t, { auth: "bearer", publicRepositories: [REPO] });
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.credentialSource, "anonymous");
  assert.equal(registry.tokenRequests.length, 1);
  assert.equal(registry.tokenRequests[0]!.authorization, undefined);
  assert.match(registry.registryRequests.at(-1)!.authorization ?? "", /^Bearer [0-9a-f]+$/);
});

test("Bearer: a token obtained with one credential is never sent for another credential or anonymously", async (t) => {
  let current: RegistryCredential[] = [alice];
  const { registry, client, ref } = await setup(
    t,
    { auth: "bearer", users: { alice: { password: alice.password! }, bob: { password: bob.password!, repositories: [] } } },
    {
      credentials: () => current,
    },
  );
  await client.resolveDigest(ref);
  const aliceToken = registry.registryRequests.at(-1)!.authorization;
  assert.match(aliceToken ?? "", /^Bearer /);

  current = [bob]; // bob may not pull team/app: his own token has no access
  const bobError = await rejection(client.resolveDigest(ref));
  assert.equal(bobError.code, "unauthorized");
  current = [];
  const anonymousError = await rejection(client.resolveDigest(ref));
  assert.equal(anonymousError.code, "unauthorized");

  assert.equal(registry.tokenRequests.length, 3, "one token request per identity");
  const afterAlice = registry.registryRequests.slice(registry.registryRequests.findIndex((r) => r.authorization === aliceToken) + 1);
  assert.ok(afterAlice.length >= 2);
  for (const r of afterAlice) assert.notEqual(r.authorization, aliceToken);
});

test("lookup order: the first credential is refused, the second works and is reported", async (t) => {
  for (const auth of ["basic", "bearer"] as const) {
    const { client, ref } = await setup(t, { auth }, { credentials: () => [mallory, alice] });
    const resolved = await client.resolveDigest(ref);
    assert.equal(resolved.credentialSource, "secret team/alice", auth);
  }
});

test("every credential refused: 'unauthorized' names the sources tried, never the secrets", async (t) => {
  for (const auth of ["basic", "bearer"] as const) {
    const { client, ref, registry } = await setup(t, { auth }, { credentials: () => [mallory, { source: "authfile", username: "bob", password: "nope" }] });
    const error = await rejection(client.resolveDigest(ref));
    assert.equal(error.code, "unauthorized");
    assert.equal(error.retryable, false);
    assert.deepEqual(error.credentialSources, ["secret team/mallory", "authfile"]);
    assert.match(
      error.message,
      new RegExp(`${registry.host}/team/app: unauthorized at ${registry.host}: tried secret team/mallory \\(.*\\), authfile \\(.*\\)`),
    );
    assert.doesNotMatch(error.message, /wrong-password|nope|Basic |Bearer [0-9a-f]/);
  }
});

test("no credentials and anonymous refused: the error says none are configured", async (t) => {
  const { client, ref, registry } = await setup(t, { auth: "basic" });
  const error = await rejection(client.getManifest(ref));
  assert.equal(error.code, "unauthorized");
  assert.deepEqual(error.credentialSources, ["anonymous"]);
  assert.match(error.message, new RegExp(`no credentials are configured for ${registry.host.replace(".", "\\.")}, and anonymous access was refused`));
});

test("a cached token the registry refuses is dropped and replaced once", async (t) => {
  const { registry, client, trips, ref } = await setup(t, { auth: "bearer" }, { credentials: () => [alice] });
  await client.resolveDigest(ref);
  registry.revokeTokens(); // the registry forgets tokens before they expire (restart, key rotation)
  trips.length = 0;
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.credentialSource, "secret team/alice");
  assert.deepEqual(
    trips.map((r) => `${new URL(r.url).pathname} ${r.status}`),
    [`/v2/${REPO}/manifests/v1 401`, "/token 200", `/v2/${REPO}/manifests/v1 200`],
  );
});

test("an identity token is exchanged at the realm with a refresh_token grant (POST, not in the URL)", async (t) => {
  const credential: RegistryCredential = { source: "authfile", identityToken: "refresh-abc" };
  const { registry, client, ref } = await setup(t, { auth: "bearer", refreshTokens: { "refresh-abc": "alice" } }, { credentials: () => [credential] });
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.credentialSource, "authfile");
  const tokenRequest = registry.tokenRequests[0]!;
  assert.equal(tokenRequest.method, "POST");
  assert.equal(tokenRequest.url, "/token");
  assert.deepEqual(Object.fromEntries(new URLSearchParams(tokenRequest.body)), {
    grant_type: "refresh_token",
    client_id: "imprimatur",
    refresh_token: "refresh-abc",
    scope: `repository:${REPO}:pull`,
    service: "fake-registry",
  });
});

test("a registry token is sent as the Bearer token without a token request", async (t) => {
  const { registry, client, ref } = await setup(t, { auth: "bearer" }, { credentials: () => [{ source: "authfile", registryToken: "static-token" }] });
  registry.tokens.set("static-token", { user: "alice", repositories: new Set([REPO]) });
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.credentialSource, "authfile");
  assert.equal(registry.tokenRequests.length, 0);
  assert.equal(registry.registryRequests.at(-1)!.authorization, "Bearer static-token");
});

test("the token realm on another host trusts the registry's CA (the registry names it)", async (t) => {
  // Same server, other name: "localhost:PORT" has no CA in the settings, only 127.0.0.1:PORT has; it is listed
  // for its loopback address only.
  const { registry, client, ref } = await setup(
    t,
    { auth: "bearer", realm: (self) => `https://localhost:${self.port}/token` },
    { credentials: () => [alice] },
    (self) => [{ host: `localhost:${self.server.port}`, allowLocalAddresses: true }],
  );
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.credentialSource, "secret team/alice");
  assert.equal(registry.tokenRequests.length, 1);
});

test("a plain-HTTP token realm is never contacted, so the credential is not sent in the clear", async (t) => {
  const realm = await startServer((_req, res) => {
    res.end("{}");
  });
  t.after(() => realm.close());
  const { client, ref } = await setup(t, { auth: "bearer", realm: () => `${realm.origin}/token` }, { credentials: () => [alice] });
  const error = await rejection(client.resolveDigest(ref));
  assert.equal(error.code, "protocol");
  assert.match(
    error.message,
    new RegExp(`refused to contact http://${realm.host}/token: plain HTTP to ${realm.host}, which is not listed with insecure: true`),
  );
  assert.equal(realm.requests.length, 0);
});

test("a registry whose /v2/ is open but whose repository wants Basic: the challenge is learned", async (t) => {
  const lookups: CredentialLookup = () => [alice];
  const { registry, client, ref } = await setup(
    t,
    {
      auth: "basic",
      intercept: (req, res) => {
        if (req.url !== "/v2/") return false;
        res.end("{}");
        return true;
      },
    },
    { credentials: lookups },
  );
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.credentialSource, "secret team/alice");
  assert.deepEqual(
    registry.registryRequests.map((r) => [r.url, r.authorization !== undefined]),
    [
      ["/v2/", false],
      [`/v2/${REPO}/manifests/v1`, false],
      [`/v2/${REPO}/manifests/v1`, true],
    ],
  );
  await client.resolveDigest(ref);
  assert.equal(registry.registryRequests.length, 4, "the learned scheme is kept: no unauthenticated try first");
});

test("credentials given with a call replace the client's lookup for that call", async (t) => {
  const { client, ref } = await setup(t, { auth: "bearer" }, { credentials: () => [mallory] });
  assert.equal((await rejection(client.resolveDigest(ref))).code, "unauthorized");
  const resolved = await client.resolveDigest(ref, { credentials: () => [alice] });
  assert.equal(resolved.credentialSource, "secret team/alice");
});

test("concurrent calls on a cold client share one ping and one token request", async (t) => {
  const { registry, client, ref } = await setup(t, { auth: "bearer" }, { credentials: () => [alice] });
  const results = await Promise.all(Array.from({ length: 5 }, () => client.resolveDigest(ref)));
  assert.equal(new Set(results.map((r) => r.digest)).size, 1);
  assert.equal(registry.requests.filter((r) => r.url === "/v2/").length, 1);
  assert.equal(registry.tokenRequests.length, 1);
});

test("a caller giving up does not fail another caller sharing its token request", async (t) => {
  let held: ServerResponse | undefined;
  let asked: () => void = () => {};
  const tokenRequested = new Promise<void>((resolve) => (asked = resolve));
  const { registry, client, ref } = await setup(
    t,
    {
      auth: "bearer",
      // Holds the token response until the test answers it, so that both callers wait on the same request.
      intercept: (req, res) => {
        if (!req.url?.startsWith("/token")) return false;
        held = res;
        asked();
        return true;
      },
    },
    { credentials: () => [alice] },
  );
  const impatient = new AbortController();
  const first = client.resolveDigest(ref, { signal: impatient.signal });
  const second = client.resolveDigest(ref);
  await tokenRequested;
  impatient.abort();
  const error = await rejection(first);
  assert.equal(error.code, "timeout");
  assert.match(error.message, /gave up waiting for a token from .*, the caller's deadline passed/);

  registry.tokens.set("held-token", { user: "alice", repositories: new Set([REPO]) });
  json(held!, 200, { token: "held-token" });
  assert.equal((await second).credentialSource, "secret team/alice");
  assert.equal(registry.tokenRequests.length, 1);
});
