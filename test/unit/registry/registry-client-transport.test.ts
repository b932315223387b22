// Connections: TLS trust and client certificates per host, plain HTTP only for listed hosts, mirrors with
// their own credentials, deadlines. Registries are in-process servers (see fake-registry.ts for why): the
// tests need several registries at once, one of them silent, and to see exactly which host got which header.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { RegistryCredential } from "../../../src/credentials/credential.ts";
import { RegistryClient } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, imageManifest, startServer, testTls, type FakeRegistryOptions } from "./fake-registry.ts";
import { freePort } from "../../support/ports.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "library/nginx";

async function registry(t: TestContext, options: FakeRegistryOptions = {}): Promise<FakeRegistry> {
  const r = await FakeRegistry.start({ https: true, ...options });
  t.after(() => r.close());
  return r;
}

function client(t: TestContext, ...args: ConstructorParameters<typeof RegistryClient>): RegistryClient {
  const c = new RegistryClient(...args);
  t.after(() => c.close());
  return c;
}

test("a registry with a private CA is trusted only with that CA in its settings", async (t) => {
  const r = await registry(t);
  const digest = r.putManifest(REPO, "1", imageManifest("1"));
  const { caPem } = await testTls();
  const ref = { registry: r.host, repository: REPO, tag: "1" };

  const untrusting = client(t, { settings: registrySettingsMap([{ host: r.host, allowLocalAddresses: true }]) });
  const error = await rejection(untrusting.resolveDigest(ref));
  assert.equal(error.code, "unreachable");
  assert.equal(error.retryable, false);
  assert.match(error.message, /TLS failed \(.*\); if the registry uses a private CA, give it as ca in the registries file/);

  const trusting = client(t, { settings: registrySettingsMap([{ host: r.host, ca: caPem, allowLocalAddresses: true }]) });
  assert.equal((await trusting.resolveDigest(ref)).digest, digest);
});

test("a registry that requires a client certificate gets the one configured for it", async (t) => {
  const r = await registry(t, { requireClientCert: true });
  const digest = r.putManifest(REPO, "1", imageManifest("1"));
  const tls = await testTls();
  const ref = { registry: r.host, repository: REPO, tag: "1" };

  const without = client(t, { settings: registrySettingsMap([{ host: r.host, ca: tls.caPem, allowLocalAddresses: true }]) });
  assert.equal((await rejection(without.resolveDigest(ref))).code, "unreachable");

  const withCert = client(t, {
    settings: registrySettingsMap([{ host: r.host, ca: tls.caPem, allowLocalAddresses: true, clientCert: tls.clientCertPem, clientKey: tls.clientKeyPem }]),
  });
  assert.equal((await withCert.resolveDigest(ref)).digest, digest);
});

test("plain HTTP only for a host listed insecure: an unlisted one is never contacted over HTTP", async (t) => {
  const r = await registry(t, { https: false });
  const digest = r.putManifest(REPO, "1", imageManifest("1"));
  const ref = { registry: r.host, repository: REPO, tag: "1" };

  const unlisted = client(t, { settings: registrySettingsMap([{ host: r.host, allowLocalAddresses: true }]) });
  const error = await rejection(unlisted.resolveDigest(ref));
  assert.equal(error.code, "unreachable"); // HTTPS to a plain-HTTP server: the TLS handshake fails
  assert.equal(r.requests.length, 0, "no HTTP request reached the plain-HTTP registry");

  const listed = client(t, { settings: registrySettingsMap([{ host: r.host, insecure: true, allowLocalAddresses: true }]) });
  const resolved = await listed.resolveDigest(ref);
  assert.equal(resolved.digest, digest);
  assert.equal(resolved.endpoint, r.host);
});

test("mirrors are tried in order with their own credentials, then the registry", async (t) => {
  const { caPem } = await testTls();
  const deadMirror = `127.0.0.1:${await freePort()}`;
  const mirror = await registry(t, { auth: "basic", users: { "mirror-user": { password: "mirror-password" } } });
  const upstream = await registry(t, { auth: "bearer", users: { "upstream-user": { password: "upstream-password" } } });
  const upstreamDigest = upstream.putManifest(REPO, "1.27", imageManifest("upstream"));

  const credentials = new Map<string, RegistryCredential[]>([
    [mirror.host, [{ source: "secret infra/mirror", username: "mirror-user", password: "mirror-password" }]],
    [upstream.host, [{ source: "secret infra/upstream", username: "upstream-user", password: "upstream-password" }]],
  ]);
  const lookups: string[] = [];
  const c = client(t, {
    settings: registrySettingsMap([
      { host: upstream.host, ca: caPem, allowLocalAddresses: true, mirrors: [deadMirror, mirror.host] },
      { host: mirror.host, ca: caPem, allowLocalAddresses: true },
      { host: deadMirror, allowLocalAddresses: true },
    ]),
    credentials: (host, repository) => {
      lookups.push(`${host} ${repository}`);
      return credentials.get(host) ?? [];
    },
  });

  // The dead mirror is unreachable, the live mirror does not have the tag: the registry answers.
  const fromUpstream = await c.resolveDigest({ registry: upstream.host, repository: REPO, tag: "1.27" });
  assert.equal(fromUpstream.digest, upstreamDigest);
  assert.equal(fromUpstream.endpoint, upstream.host);
  assert.equal(fromUpstream.credentialSource, "secret infra/upstream");
  assert.deepEqual(lookups, [`${deadMirror} ${REPO}`, `${mirror.host} ${REPO}`, `${upstream.host} ${REPO}`]);
  const mirrorBasic = "Basic " + Buffer.from("mirror-user:mirror-password").toString("base64");
  assert.ok(mirror.requests.some((r) => r.authorization === mirrorBasic));
  for (const r of upstream.requests) assert.notEqual(r.authorization, mirrorBasic);
  for (const r of mirror.requests) assert.doesNotMatch(r.authorization ?? "", /^Bearer/);

  // Once the mirror has it, the mirror answers.
  const mirrorDigest = mirror.putManifest(REPO, "1.27", imageManifest("mirrored"));
  const fromMirror = await c.resolveDigest({ registry: upstream.host, repository: REPO, tag: "1.27" });
  assert.deepEqual([fromMirror.digest, fromMirror.endpoint, fromMirror.credentialSource], [mirrorDigest, mirror.host, "secret infra/mirror"]);
});

test("when every endpoint fails, the error names each one and takes the registry's code", async (t) => {
  const { caPem } = await testTls();
  const deadMirror = `127.0.0.1:${await freePort()}`;
  const mirror = await registry(t, { auth: "basic" });
  const upstream = await registry(t);
  const c = client(t, {
    settings: registrySettingsMap([
      { host: upstream.host, ca: caPem, allowLocalAddresses: true, mirrors: [deadMirror, mirror.host] },
      { host: mirror.host, ca: caPem, allowLocalAddresses: true },
      { host: deadMirror, allowLocalAddresses: true },
    ]),
  });

  const error = await rejection(c.resolveDigest({ registry: upstream.host, repository: REPO, tag: "missing" }));
  assert.equal(error.code, "not-found");
  assert.deepEqual(
    error.attempts?.map((a) => [a.endpoint, a.code]),
    [
      [deadMirror, "unreachable"],
      [mirror.host, "unauthorized"],
      [upstream.host, "not-found"],
    ],
  );
  assert.match(
    error.message,
    new RegExp(
      `^${upstream.host}/${REPO}: every endpoint failed, mirrors first: ${deadMirror}: .*ECONNREFUSED.*; ${mirror.host}: unauthorized .*; ${upstream.host}: not found: .*`,
    ),
  );
});

test("the caller's signal aborts a request the registry never answers, as a timeout", async (t) => {
  // Answers the API check, then never answers the manifest request.
  const silent = await startServer(
    (req, res) => {
      if (req.url === "/v2/") res.end("{}");
    },
    { https: true },
  );
  t.after(() => silent.close());
  const { caPem } = await testTls();
  const c = client(t, { settings: registrySettingsMap([{ host: silent.host, ca: caPem, allowLocalAddresses: true }]), requestTimeoutMs: 300_000 });
  const controller = new AbortController();
  const pending = c.resolveDigest({ registry: silent.host, repository: REPO, tag: "1" }, { signal: controller.signal });
  while (silent.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
  controller.abort();
  const error = await rejection(pending);
  assert.equal(error.code, "timeout");
  assert.equal(error.retryable, true);
  assert.match(error.message, new RegExp(`^${silent.host}/${REPO}: https://${silent.host}: gave up, the caller's deadline passed`));
});

test("the per-request timeout ends a request the registry never answers", async (t) => {
  const silent = await startServer(() => {}, { https: true });
  t.after(() => silent.close());
  const { caPem } = await testTls();
  const c = client(t, { settings: registrySettingsMap([{ host: silent.host, ca: caPem, allowLocalAddresses: true }]), requestTimeoutMs: 200 });
  const error = await rejection(c.resolveDigest({ registry: silent.host, repository: REPO, tag: "1" }));
  assert.equal(error.code, "timeout");
  assert.match(error.message, /no answer within 200 ms/);
});

test("an already-aborted signal fails without contacting the registry", async (t) => {
  const r = await registry(t);
  const { caPem } = await testTls();
  const c = client(t, { settings: registrySettingsMap([{ host: r.host, ca: caPem, allowLocalAddresses: true }]) });
  const error = await rejection(c.resolveDigest({ registry: r.host, repository: REPO, tag: "1" }, { signal: AbortSignal.abort() }));
  assert.equal(error.code, "timeout");
  assert.equal(r.requests.length, 0);
});

test("a closed client refuses further calls", async (t) => {
  const r = await registry(t);
  r.putManifest(REPO, "1", imageManifest("1"));
  const { caPem } = await testTls();
  const c = new RegistryClient({ settings: registrySettingsMap([{ host: r.host, ca: caPem, allowLocalAddresses: true }]) });
  await c.resolveDigest({ registry: r.host, repository: REPO, tag: "1" });
  await c.close();
  await assert.rejects(c.resolveDigest({ registry: r.host, repository: REPO, tag: "1" }), /the registry client is closed/);
});
