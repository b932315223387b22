// Registry authentication at its edges: what the ping and the token service may answer (statuses, missing or
// broken challenges, redirects, bodies that are not tokens), which credential goes where (a username without a
// password goes nowhere; concurrent callers with different credentials or repositories never share a token),
// and the errors each case ends in. The registry is the in-process FakeRegistry (see fake-registry.ts for why).
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RegistryCredential } from "../../../src/credentials/credential.ts";
import { readTokenResponse } from "../../../src/registry/registry-auth.ts";
import { RegistryClient, type RegistryClientOptions } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, imageManifest, json, testTls, type FakeRegistryOptions } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const OTHER = "team/other";
const alice: RegistryCredential = { source: "secret team/alice", username: "alice", password: "alice-password" };
const bob: RegistryCredential = { source: "secret team/bob", username: "bob", password: "bob-password" };
const mallory: RegistryCredential = { source: "secret team/mallory", username: "alice", password: "wrong-password" };
const basic = (c: RegistryCredential) => "Basic " + Buffer.from(`${c.username}:${c.password}`).toString("base64");

async function setup(t: TestContext, registryOptions: FakeRegistryOptions, clientOptions: RegistryClientOptions = {}) {
  const registry = await FakeRegistry.start({
    https: true,
    users: { alice: { password: alice.password! }, bob: { password: bob.password! } },
    ...registryOptions,
  });
  const digest = registry.putManifest(REPO, "v1", imageManifest("v1"));
  registry.putManifest(OTHER, "v1", imageManifest("other"));
  const { caPem } = await testTls();
  const client = new RegistryClient({ settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]), ...clientOptions });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, digest, ref: { registry: registry.host, repository: REPO, tag: "v1" } };
}

/** An intercept answering the requests whose path starts with `prefix`. */
const answer =
  (prefix: string, respond: (req: IncomingMessage, res: ServerResponse) => void) =>
  (req: IncomingMessage, res: ServerResponse): boolean => {
    if (!req.url?.startsWith(prefix)) return false;
    respond(req, res);
    return true;
  };

test("token responses: only a non-empty string is a token; a lifetime must be positive and finite; issued_at a date string", () => {
  const read = (text: string) => readTokenResponse(Buffer.from(text));
  assert.equal(read("5"), "a response that is not a JSON object");
  assert.equal(read('"token"'), "a response that is not a JSON object");
  assert.deepEqual(read('{"access_token":"","token":"t"}'), { token: "t" });
  assert.deepEqual(read('{"access_token":5,"token":"t"}'), { token: "t" });
  assert.equal(read('{"token":5}'), "a response without a token (neither token nor access_token)");
  assert.equal(read('{"token":""}'), "a response without a token (neither token nor access_token)");
  assert.deepEqual(read('{"token":"t","expires_in":0}'), { token: "t" });
  assert.deepEqual(read('{"token":"t","expires_in":1e999}'), { token: "t" });
  assert.deepEqual(read('{"token":"t","issued_at":5}'), { token: "t" });
});

test("the ping: a 401 without a usable challenge and an unexpected status are errors that say so", async (t) => {
  const cases: Array<[(req: IncomingMessage, res: ServerResponse) => void, string, RegExp]> = [
    [(_q, res) => json(res, 401, {}), "protocol", /answered GET \/v2\/ with 401 but no WWW-Authenticate header$/],
    [
      (_q, res) => {
        res.setHeader("www-authenticate", 'Bearer realm="unterminated');
        json(res, 401, {});
      },
      "protocol",
      /answered GET \/v2\/ with 401 but a WWW-Authenticate header that does not parse \(unterminated quoted value for parameter "realm" at position \d+\)$/,
    ],
    [(_q, res) => json(res, 404, {}), "not-found", /not found: GET \/v2\/ \(the registry API check\) at 127\.0\.0\.1:\d+ returned HTTP 404$/],
  ];
  for (const [respond, code, message] of cases) {
    const { client, ref, registry } = await setup(t, { auth: "bearer", intercept: answer("/v2/", respond) });
    const error = await rejection(client.getManifest(ref));
    assert.equal(error.code, code);
    assert.match(error.message, message);
    assert.equal(error.endpoint, registry.host);
    assert.equal(error.repository, REPO);
  }
});

test("registry statuses: 429 and 5xx are unavailable, other unexpected ones a protocol error", async (t) => {
  const statuses: Array<[number, string, string]> = [
    [429, "unavailable", "returned HTTP 429"],
    [503, "unavailable", "returned HTTP 503"],
    [400, "protocol", "unexpected answer: manifest v1 at HOST returned HTTP 400"],
  ];
  for (const [status, code, ending] of statuses) {
    const { client, ref, registry } = await setup(t, { intercept: answer(`/v2/${REPO}/`, (_q, res) => json(res, status, {})) });
    const error = await rejection(client.getManifest(ref));
    assert.equal(error.code, code, String(status));
    assert.ok(error.message.endsWith(ending.replace("HOST", registry.host)), error.message);
  }
});

test("Basic: no credential is sent to a public repository, and a credential without a password is never sent", async (t) => {
  const { registry, client, ref } = await setup(t, { auth: "basic", publicRepositories: [REPO] });
  const resolved = await client.resolveDigest(ref);
  assert.equal(resolved.credentialSource, "anonymous");
  assert.equal(registry.registryRequests.at(-1)!.authorization, undefined);

  const usernameOnly: RegistryCredential = { source: "authfile", username: "alice" };
  const { registry: closed, client: picky, ref: closedRef } = await setup(t, { auth: "basic" }, { credentials: () => [usernameOnly, alice] });
  assert.equal((await picky.resolveDigest(closedRef)).credentialSource, "secret team/alice");
  assert.deepEqual(
    closed.registryRequests.filter((r) => r.url.includes("/manifests/")).map((r) => r.authorization),
    [basic(alice)],
  );
  const passwordOnly: RegistryCredential = { source: "authfile", password: "alice-password" };
  const { registry: closed2, client: picky2, ref: closedRef2 } = await setup(t, { auth: "basic" }, { credentials: () => [passwordOnly, alice] });
  assert.equal((await picky2.resolveDigest(closedRef2)).credentialSource, "secret team/alice");
  assert.deepEqual(
    closed2.registryRequests.filter((r) => r.url.includes("/manifests/")).map((r) => r.authorization),
    [basic(alice)],
  );
  const { client: only, ref: onlyRef } = await setup(t, { auth: "basic" }, { credentials: () => [usernameOnly] });
  const error = await rejection(only.resolveDigest(onlyRef));
  assert.match(error.message, /tried authfile \(has no username and password, and the registry asks for Basic authentication\)$/);
});

test("Bearer: a username without a password gets an anonymous token request, without account or Authorization", async (t) => {
  const { registry, client, ref } = await setup(
    t,
    { auth: "bearer", publicRepositories: [REPO] },
    { credentials: () => [{ source: "authfile", username: "alice" }] },
  );
  await client.resolveDigest(ref);
  const tokenRequest = registry.tokenRequests[0]!;
  assert.equal(tokenRequest.authorization, undefined);
  assert.equal(new URL(tokenRequest.url, "https://x").searchParams.get("account"), null);
});

test("Bearer: the token request names service, scope and account; a password goes only with it", async (t) => {
  const { registry, client, ref } = await setup(t, { auth: "bearer" }, { credentials: () => [alice] });
  await client.resolveDigest(ref);
  const tokenRequest = registry.tokenRequests[0]!;
  assert.deepEqual(Object.fromEntries(new URL(tokenRequest.url, "https://x").searchParams), {
    service: "fake-registry",
    scope: `repository:${REPO}:pull`,
    account: "alice",
  });
  assert.equal(tokenRequest.authorization, basic(alice));
});

test("Bearer without a service: no service parameter in the token request or the refresh_token form", async (t) => {
  const headers: Array<string | undefined> = [];
  for (const credential of [alice, { source: "authfile", identityToken: "refresh-abc" }]) {
    const { registry, client, ref } = await setup(
      t,
      {
        auth: "bearer",
        refreshTokens: { "refresh-abc": "alice" },
        intercept: (req, res) => {
          if (req.url?.startsWith("/token")) headers.push(req.headers["content-type"]);
          if (!req.url?.startsWith("/v2/") || req.headers.authorization?.startsWith("Bearer ")) return false;
          res.setHeader("www-authenticate", `Bearer realm="${registry.server.origin}/token"`);
          json(res, 401, {});
          return true;
        },
      },
      { credentials: () => [credential] },
    );
    assert.equal((await client.resolveDigest(ref)).credentialSource, credential.source);
    const tokenRequest = registry.tokenRequests[0]!;
    const params = tokenRequest.method === "POST" ? new URLSearchParams(tokenRequest.body) : new URL(tokenRequest.url, "https://x").searchParams;
    assert.equal(params.has("service"), false, tokenRequest.method);
    assert.equal(params.get("scope"), `repository:${REPO}:pull`);
  }
  assert.deepEqual(headers, [undefined, "application/x-www-form-urlencoded"]);
});

test("the token service: a redirect is followed; 403 refuses the credential; 5xx and non-JSON are errors", async (t) => {
  const { registry, client, ref } = await setup(
    t,
    {
      auth: "bearer",
      realm: (self) => `${self.origin}/old-token`,
      intercept: answer("/old-token", (req, res) => {
        res.writeHead(307, { location: req.url!.replace("/old-token", "/token") });
        res.end();
      }),
    },
    { credentials: () => [alice] },
  );
  assert.equal((await client.resolveDigest(ref)).credentialSource, "secret team/alice");
  assert.equal(registry.tokenRequests[0]!.authorization, basic(alice), "same-origin redirect keeps the credential");

  const refusing = await setup(t, { auth: "bearer", intercept: answer("/token", (_q, res) => json(res, 403, {})) }, { credentials: () => [alice] });
  const refused = await rejection(refusing.client.resolveDigest(refusing.ref));
  assert.equal(refused.code, "unauthorized");
  assert.ok(refused.message.endsWith(`tried secret team/alice (refused by the token service ${refusing.registry.host}: HTTP 403)`), refused.message);
  assert.equal(refusing.registry.registryRequests.filter((r) => r.url.includes("/manifests/")).length, 0, "no request without a token");

  const failing = await setup(t, { auth: "bearer", intercept: answer("/token", (_q, res) => json(res, 500, {})) }, { credentials: () => [alice] });
  const unavailable = await rejection(failing.client.resolveDigest(failing.ref));
  assert.equal(unavailable.code, "unavailable");
  assert.ok(unavailable.message.endsWith(`the token request at ${failing.registry.host} returned HTTP 500`), unavailable.message);

  const garbled = await setup(
    t,
    {
      auth: "bearer",
      intercept: answer("/token", (_q, res) => {
        res.end("<html>");
      }),
    },
    { credentials: () => [alice] },
  );
  const protocol = await rejection(garbled.client.resolveDigest(garbled.ref));
  assert.equal(protocol.code, "protocol");
  assert.equal(protocol.endpoint, garbled.registry.host);
  assert.ok(protocol.message.endsWith(`the token service ${garbled.registry.host} sent a response that is not JSON`), protocol.message);
});

test("a token service refusing the credential: the registry never sees a request, and the reason names the service", async (t) => {
  const { registry, client, ref } = await setup(t, { auth: "bearer" }, { credentials: () => [mallory] });
  const error = await rejection(client.resolveDigest(ref));
  assert.ok(error.message.endsWith(`tried secret team/mallory (refused by the token service ${registry.host}: HTTP 401)`), error.message);
  assert.equal(registry.registryRequests.filter((r) => r.url.includes("/manifests/")).length, 0);
});

test("a token response over 1 MiB is refused and named", async (t) => {
  const { client, ref } = await setup(
    t,
    {
      auth: "bearer",
      intercept: answer("/token", (_q, res) => {
        res.end(JSON.stringify({ token: "t".repeat(1024 * 1024 + 1) }));
      }),
    },
    { credentials: () => [alice] },
  );
  const error = await rejection(client.resolveDigest(ref));
  assert.match(error.message, /token response/);
});

test("a realm that is not a URL is a protocol error", async (t) => {
  const { client, ref, registry } = await setup(t, { auth: "bearer", realm: () => "not a url" }, { credentials: () => [alice] });
  const error = await rejection(client.resolveDigest(ref));
  assert.equal(error.code, "protocol");
  assert.equal(error.endpoint, registry.host);
  assert.ok(error.message.endsWith(`${registry.host} names a token realm that is not a URL`), error.message);
});

test("concurrent cold calls with different credentials or repositories each get their own token", async (t) => {
  const { registry, client, ref } = await setup(t, { auth: "bearer" });
  const results = await Promise.all([
    client.resolveDigest(ref, { credentials: () => [alice] }),
    client.resolveDigest(ref, { credentials: () => [bob] }),
    client.resolveDigest({ ...ref, repository: OTHER }, { credentials: () => [alice] }),
  ]);
  assert.deepEqual(
    results.map((r) => r.credentialSource),
    ["secret team/alice", "secret team/bob", "secret team/alice"],
  );
  const asked = registry.tokenRequests.map(
    (r) => `${r.authorization === basic(alice) ? "alice" : "bob"} ${new URL(r.url, "https://x").searchParams.get("scope")}`,
  );
  assert.deepEqual(asked.sort(), [`alice repository:${REPO}:pull`, `alice repository:${OTHER}:pull`, `bob repository:${REPO}:pull`]);
});

test("a refused cached token is forgotten even when its replacement is refused: the next call does not send it again", async (t) => {
  let tokenServiceOpen = true;
  const closedTokenService = answer("/token", (_q, res) => json(res, 401, {}));
  const { registry, client, ref } = await setup(
    t,
    { auth: "bearer", intercept: (req, res) => !tokenServiceOpen && closedTokenService(req, res) },
    { credentials: () => [alice] },
  );
  await client.resolveDigest(ref);
  registry.revokeTokens();
  tokenServiceOpen = false;
  assert.equal((await rejection(client.resolveDigest(ref))).code, "unauthorized");
  const before = registry.registryRequests.length;
  assert.equal((await rejection(client.resolveDigest(ref))).code, "unauthorized");
  assert.equal(registry.registryRequests.length, before, "the refused token is not sent again");
});

test("a caller giving up on the ping fails as a timeout naming it", async (t) => {
  const { client, ref, registry } = await setup(t, { intercept: answer("/v2/", () => {}) }, { requestTimeoutMs: 2000 });
  const error = await rejection(client.getManifest(ref, { signal: AbortSignal.timeout(100) }));
  assert.equal(error.code, "timeout");
  assert.ok(error.message.includes(`gave up waiting for GET /v2/ from ${registry.host}`), error.message);
  assert.equal(error.endpoint, registry.host);
});

test("two registries pinged at once each get their own ping: one's scheme is never taken for the other's", async (t) => {
  const open = await FakeRegistry.start({ https: true });
  const guarded = await FakeRegistry.start({ https: true, auth: "basic", users: { alice: { password: alice.password! } } });
  t.after(() => Promise.all([open.close(), guarded.close()]));
  open.putManifest(REPO, "v1", imageManifest("open"));
  guarded.putManifest(REPO, "v1", imageManifest("guarded"));
  const { caPem } = await testTls();
  const client = new RegistryClient({
    settings: registrySettingsMap([open, guarded].map((r) => ({ host: r.host, ca: caPem, allowLocalAddresses: true }))),
    credentials: (host) => (host === guarded.host ? [alice] : []),
  });
  t.after(() => client.close());
  await Promise.all([
    client.getManifest({ registry: open.host, repository: REPO, tag: "v1" }),
    client.getManifest({ registry: guarded.host, repository: REPO, tag: "v1" }),
  ]);
  assert.deepEqual(
    guarded.requests.map((r) => [r.method, r.url, r.authorization === undefined ? "none" : "basic"]),
    [
      ["GET", "/v2/", "none"],
      ["GET", `/v2/${REPO}/manifests/v1`, "basic"],
    ],
    "its own ping first, then the manifest with the credential its challenge asks for",
  );
});
