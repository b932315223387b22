// Which addresses the registry client connects to. The registry, its "storage" and the servers it names are
// in-process (see fake-registry.ts), all on loopback: each is listed with allowLocalAddresses: true or not, and
// an unlisted one must never see a request, whether an image reference, a redirect or a token realm named it.
// Link-local and metadata addresses are named in redirects and realms but never reached: the client refuses
// them before connecting.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { RegistryClient } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap, type RegistrySettings } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, imageManifest, startServer, testTls, type TestServer } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const BLOB = Buffer.from("layer bytes");

async function client(t: TestContext, settings: RegistrySettings[]): Promise<RegistryClient> {
  const c = new RegistryClient({ settings: registrySettingsMap(settings), requestTimeoutMs: 2_000 });
  t.after(() => c.close());
  return c;
}

async function registry(t: TestContext, intercept?: (req: IncomingMessage, res: ServerResponse) => boolean, realm?: string): Promise<FakeRegistry> {
  const r = await FakeRegistry.start({
    https: true,
    ...(realm ? { auth: "bearer" as const, realm: () => realm, publicRepositories: [REPO] } : {}),
    ...(intercept ? { intercept } : {}),
  });
  t.after(() => r.close());
  return r;
}

async function storage(t: TestContext): Promise<TestServer> {
  const server = await startServer(
    (_req, res) => {
      res.end(BLOB);
    },
    { https: true },
  );
  t.after(() => server.close());
  return server;
}

const redirectBlobs =
  (location: (digest: string) => string) =>
  (req: IncomingMessage, res: ServerResponse): boolean => {
    const match = /\/blobs\/(sha256:[0-9a-f]+)$/.exec(req.url ?? "");
    if (!match) return false;
    res.writeHead(307, { location: location(match[1]!) });
    res.end();
    return true;
  };

test("an image on an unlisted loopback registry is refused before any request: code address-refused, the address named", async (t) => {
  const r = await registry(t);
  r.putManifest(REPO, "1", imageManifest("a"));
  const { caPem } = await testTls();
  const c = await client(t, [{ host: r.host, ca: caPem }]);
  const error = await rejection(c.getManifest({ registry: r.host, repository: REPO, tag: "1" }));
  assert.equal(error.code, "address-refused");
  assert.equal(error.retryable, false);
  assert.match(
    error.message,
    new RegExp(
      `^${r.host}/${REPO}: refused to connect to https://${r.host}: ${r.host} is 127\\.0\\.0\\.1, a loopback address: refused; list ${r.host} with allowLocalAddresses: true in the registries file if it is meant to be reached there$`,
    ),
  );
  assert.equal(r.requests.length, 0);

  const listed = await client(t, [{ host: r.host, ca: caPem, allowLocalAddresses: true }]);
  assert.equal((await listed.getManifest({ registry: r.host, repository: REPO, tag: "1" })).mediaType, "application/vnd.oci.image.manifest.v1+json");
});

test("localhost and [::1] are refused too: a name by the addresses it resolves to, a literal by itself", async (t) => {
  const r = await registry(t);
  const { caPem } = await testTls();
  const c = await client(t, [{ host: r.host, ca: caPem, allowLocalAddresses: true }]);
  const localhost = `localhost:${r.server.port}`;
  const byName = await rejection(c.getManifest({ registry: localhost, repository: REPO, tag: "1" }));
  assert.equal(byName.code, "address-refused");
  assert.match(byName.message, new RegExp(`${localhost} resolves to (127\\.0\\.0\\.1|::1), a loopback address: refused`));
  const v6 = await rejection(c.getManifest({ registry: "[::1]:5000", repository: REPO, tag: "1" }));
  assert.equal(v6.code, "address-refused");
  assert.match(v6.message, /\[::1\]:5000 is ::1, a loopback address: refused/);
  assert.equal(r.requests.length, 0);
});

test("a blob redirect to an unlisted loopback host is refused at the redirect, and that host gets no request", async (t) => {
  const store = await storage(t);
  const r = await registry(
    t,
    redirectBlobs((d) => `https://${store.host}/storage/${d}`),
  );
  const digest = r.putBlob(BLOB);
  const { caPem } = await testTls();
  const c = await client(t, [{ host: r.host, ca: caPem, allowLocalAddresses: true }]);
  const error = await rejection(c.getBlob({ registry: r.host, repository: REPO }, digest));
  assert.equal(error.code, "address-refused");
  assert.match(
    error.message,
    new RegExp(
      `refused to connect to https://${store.host} \\(redirected from https://${r.host}/v2/${REPO}/blobs/${digest}\\): ${store.host} is 127\\.0\\.0\\.1, a loopback address`,
    ),
  );
  assert.equal(store.requests.length, 0);

  const listed = await client(t, [
    { host: r.host, ca: caPem, allowLocalAddresses: true },
    { host: store.host, ca: caPem, allowLocalAddresses: true },
  ]);
  assert.deepEqual((await listed.getBlob({ registry: r.host, repository: REPO }, digest)).body, BLOB);
  assert.equal(store.requests.length, 1);
});

for (const [what, target, kind] of [
  ["the cloud metadata address", "169.254.169.254", "cloud metadata"],
  ["a link-local address", "169.254.10.1", "link-local"],
  ["an IPv4-mapped loopback address", "[::ffff:127.0.0.1]", "loopback"],
  ["the unspecified address", "0.0.0.0", "unspecified"],
] as const) {
  test(`a blob redirect to ${what} is refused before connecting`, async (t) => {
    const r = await registry(
      t,
      redirectBlobs((d) => `https://${target}/storage/${d}`),
    );
    const digest = r.putBlob(BLOB);
    const { caPem } = await testTls();
    const c = await client(t, [{ host: r.host, ca: caPem, allowLocalAddresses: true }]);
    const error = await rejection(c.getBlob({ registry: r.host, repository: REPO }, digest));
    assert.equal(error.code, "address-refused");
    assert.match(error.message, new RegExp(`is an? ${kind} address: refused`));
  });
}

test("a token realm on the metadata address or an unlisted loopback host is refused; the registry gets no token", async (t) => {
  const realmServer = await startServer(
    (_req, res) => {
      res.end('{"token":"t"}');
    },
    { https: true },
  );
  t.after(() => realmServer.close());
  const { caPem } = await testTls();
  for (const [realm, reached] of [
    ["https://169.254.169.254/latest/meta-data/token", undefined],
    [`${realmServer.origin}/token`, realmServer],
  ] as const) {
    const r = await registry(t, undefined, realm);
    r.putManifest(REPO, "1", imageManifest("a"));
    const c = await client(t, [{ host: r.host, ca: caPem, allowLocalAddresses: true }]);
    const error = await rejection(c.getManifest({ registry: r.host, repository: REPO, tag: "1" }));
    assert.equal(error.code, "address-refused", error.message);
    assert.match(error.message, new RegExp(`refused to connect to the token realm ${new URL(realm).origin} named by ${r.host}: `));
    assert.equal(reached?.requests.length ?? 0, 0);
  }
});

test("a refresh token (identitytoken) is never posted to a token realm on the metadata address; the refusal names the token realm", async (t) => {
  const realm = "https://169.254.169.254/latest/meta-data/token";
  const r = await registry(t, undefined, realm);
  r.putManifest(REPO, "1", imageManifest("a"));
  const { caPem } = await testTls();
  const c = new RegistryClient({
    settings: registrySettingsMap([{ host: r.host, ca: caPem, allowLocalAddresses: true }]),
    requestTimeoutMs: 2_000,
    credentials: () => [{ source: "test refresh token", identityToken: "refresh-token-1" }],
  });
  t.after(() => c.close());
  const error = await rejection(c.getManifest({ registry: r.host, repository: REPO, tag: "1" }));
  assert.equal(error.code, "address-refused", error.message);
  assert.match(error.message, new RegExp(`refused to connect to the token realm https://169\\.254\\.169\\.254 named by ${r.host}: `));
});
