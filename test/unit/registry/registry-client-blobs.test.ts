// Blobs: digest verification, size limits and redirects. The registry and the "storage" it redirects to are
// in-process servers (see fake-registry.ts for why): the tests need redirects to chosen hosts and schemes, and
// bodies that do not match their digest, which the real docker-registry does not produce.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { RegistryClient, type RegistryClientOptions, type RoundTrip } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap, type RegistrySettings } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, startServer, testTls, type FakeRegistry as Registry, type TestServer } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const alice = { source: "secret team/alice", username: "alice", password: "alice-password" };
const ALICE_BASIC = "Basic " + Buffer.from("alice:alice-password").toString("base64");
const BLOB = Buffer.from("layer bytes ".repeat(100));

async function setup(
  t: TestContext,
  intercept?: (req: IncomingMessage, res: ServerResponse, registry: Registry) => boolean,
  options: { extraSettings?: RegistrySettings[]; client?: RegistryClientOptions } = {},
) {
  const registry = await FakeRegistry.start({
    https: true,
    auth: "basic",
    users: { alice: { password: alice.password } },
    ...(intercept ? { intercept } : {}),
  });
  const digest = registry.putBlob(BLOB);
  const { caPem } = await testTls();
  const trips: RoundTrip[] = [];
  const client = new RegistryClient({
    settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }, ...(options.extraSettings ?? [])]),
    credentials: () => [alice],
    onRoundTrip: (trip) => trips.push(trip),
    ...options.client,
  });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, digest, trips, repo: { registry: registry.host, repository: REPO } };
}

async function storage(t: TestContext, https: boolean): Promise<TestServer> {
  const server = await startServer(
    (_req, res) => {
      res.end(BLOB);
    },
    { https },
  );
  t.after(() => server.close());
  return server;
}

/** A registry hook answering blob requests with a redirect to `location(digest)`. */
const redirectBlobs =
  (status: number, location: (digest: string) => string) =>
  (req: IncomingMessage, res: ServerResponse): boolean => {
    const match = /\/blobs\/(sha256:[0-9a-f]+)$/.exec(req.url ?? "");
    if (!match || req.headers.authorization !== ALICE_BASIC) return false;
    res.writeHead(status, { location: location(match[1]!) });
    res.end();
    return true;
  };

test("getBlob returns the verified bytes and who authorized them", async (t) => {
  const { client, digest, repo, registry } = await setup(t);
  const blob = await client.getBlob(repo, digest);
  assert.deepEqual(blob, { digest, body: BLOB, endpoint: registry.host, credentialSource: "secret team/alice" });
});

test("a blob whose bytes do not match its digest is a digest mismatch", async (t) => {
  const { client, digest, repo } = await setup(t, (req, res) => {
    if (!req.url?.includes("/blobs/")) return false;
    res.end(Buffer.concat([BLOB, Buffer.from("!")]));
    return true;
  });
  const error = await rejection(client.getBlob(repo, digest));
  assert.equal(error.code, "digest-mismatch");
  assert.match(
    error.message,
    new RegExp(`blob ${digest} from .* hashes to sha256:[0-9a-f]{64}: the registry's body does not match its digest: tampered or broken`),
  );
});

test("a blob over maxBytes is refused", async (t) => {
  const { client, digest, repo } = await setup(t);
  const error = await rejection(client.getBlob(repo, digest, { maxBytes: 100 }));
  assert.equal(error.code, "too-large");
  assert.match(error.message, /the limit is 100 bytes/);
});

test("a redirect to another host does not carry the Authorization header", async (t) => {
  const store = await storage(t, true);
  // localhost and 127.0.0.1 are the same machine but different origins, as a CDN would be.
  const { client, digest, repo, trips } = await setup(
    t,
    redirectBlobs(307, (d) => `https://localhost:${store.port}/storage/${d}?X-Signature=secret-signature`),
    { extraSettings: [{ host: `localhost:${store.port}`, allowLocalAddresses: true }] },
  );
  const blob = await client.getBlob(repo, digest);
  assert.deepEqual(blob.body, BLOB);
  assert.equal(store.requests.length, 1);
  assert.equal(store.requests[0]!.authorization, undefined);
  assert.equal(store.requests[0]!.url, `/storage/${digest}?X-Signature=secret-signature`);
  // Round trips are reported without query strings, which can be signatures.
  assert.equal(trips.at(-1)!.url, `https://localhost:${store.port}/storage/${digest}`);
});

test("a same-origin redirect keeps the Authorization header", async (t) => {
  let redirectedAuthorization: string | undefined = "(not reached)";
  const { client, digest, repo, registry } = await setup(t, (req, res, self) => {
    if (req.url?.startsWith("/moved/")) {
      redirectedAuthorization = req.headers.authorization;
      res.end(self.blobs.get(req.url.slice("/moved/".length)));
      return true;
    }
    return redirectBlobs(302, (d) => `/moved/${d}`)(req, res);
  });
  await client.getBlob(repo, digest);
  assert.equal(redirectedAuthorization, ALICE_BASIC);
  assert.equal(registry.requests.filter((r) => r.url.startsWith("/moved/")).length, 1);
});

test("an https → http redirect is refused unless the target host is listed insecure", async (t) => {
  const plain = await storage(t, false);
  const { client, digest, repo } = await setup(
    t,
    redirectBlobs(301, (d) => `http://127.0.0.1:${plain.port}/storage/${d}`),
  );
  const error = await rejection(client.getBlob(repo, digest));
  assert.equal(error.code, "protocol");
  assert.match(
    error.message,
    new RegExp(
      `refused the redirect from https://.* to plain HTTP http://127\\.0\\.0\\.1:${plain.port}/storage/sha256:[0-9a-f]+ \\(an HTTPS → HTTP downgrade\\)`,
    ),
  );
  assert.equal(plain.requests.length, 0);

  const listed = await setup(
    t,
    redirectBlobs(301, (d) => `http://127.0.0.1:${plain.port}/storage/${d}`),
    { extraSettings: [{ host: plain.host, insecure: true, allowLocalAddresses: true }] },
  );
  assert.deepEqual((await listed.client.getBlob(listed.repo, listed.digest)).body, BLOB);
  assert.equal(plain.requests[0]!.authorization, undefined);
});

test("more than 5 redirects is a protocol error", async (t) => {
  const { client, digest, repo, trips } = await setup(t, (req, res) => {
    if (!req.url?.includes("/blobs/") && !req.url?.startsWith("/loop")) return false;
    res.writeHead(307, { location: `/loop/${Math.random()}` });
    res.end();
    return true;
  });
  const error = await rejection(client.getBlob(repo, digest));
  assert.equal(error.code, "protocol");
  assert.match(error.message, /more than 5 redirects/);
  assert.equal(trips.filter((r) => r.status === 307).length, 6);
});
