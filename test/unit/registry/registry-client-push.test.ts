// RegistryClient's pushes (what `imprimatur install` sends its image with): pushBlob's HEAD, POST and PUT, pushManifest,
// the pull,push token scope, and the registry's refusals and misbehaviour. The registry is the in-process
// FakeRegistry (fake-registry.ts), made to misbehave on purpose; test/e2e/registry-push.test.ts pushes to a real
// docker-registry.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { CredentialKeyring } from "../../../src/credentials/keyring.ts";
import { RegistryClient } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, OCI_INDEX, OCI_MANIFEST, clientThroughMirror, imageManifest, json, sha256, testTls, type FakeRegistryOptions } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const USERS = { pusher: { password: "pusher-password", push: true }, reader: { password: "reader-password" } };
const LAYER = Buffer.from("layer bytes, as text so the fake registry keeps them intact");

async function setup(t: TestContext, user: keyof typeof USERS = "pusher", options: FakeRegistryOptions = {}) {
  const registry = await FakeRegistry.start({ https: true, auth: "bearer", users: USERS, ...options });
  const { caPem } = await testTls();
  const client = new RegistryClient({
    settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]),
    credentials: CredentialKeyring.of([{ key: registry.host, credential: { source: `test ${user}`, username: user, password: USERS[user].password } }]).lookup,
  });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, repo: { registry: registry.host, repository: REPO } };
}

const writes = (registry: FakeRegistry) => registry.registryRequests.filter((r) => r.method === "POST" || r.method === "PUT");

test("pushBlob: a blob the registry lacks is uploaded by POST then one PUT with its digest, under a pull,push token", async (t) => {
  const { registry, client, repo } = await setup(t);
  const digest = sha256(LAYER);
  assert.deepEqual(await client.pushBlob(repo, digest, LAYER), { uploaded: true });
  assert.deepEqual(registry.blobs.get(digest), LAYER);
  const [head, post, put] = registry.registryRequests.filter((r) => r.authorization !== undefined);
  assert.equal(head?.method, "HEAD");
  assert.equal(head?.url, `/v2/${REPO}/blobs/${digest}`);
  assert.equal(post?.method, "POST");
  assert.equal(post?.url, `/v2/${REPO}/blobs/uploads/`);
  assert.equal(put?.method, "PUT");
  // The Location's own query is kept and the digest added to it.
  assert.match(
    put!.url,
    new RegExp(`^/v2/${REPO}/blobs/uploads/[0-9a-f]+\\?_state=opened&digest=${encodeURIComponent(digest).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`),
  );
  assert.equal(put?.body, LAYER.toString("utf8"));
  assert.equal(put?.contentType, "application/octet-stream", "the monolithic upload's type, as the distribution spec gives it");
  for (const r of [head, post, put]) assert.match(r!.authorization!, /^Bearer /, `${r!.method} carries the token`);
  const scopes = registry.tokenRequests.map((r) => new URL(r.url, "http://x").searchParams.get("scope"));
  assert.deepEqual([...new Set(scopes)], [`repository:${REPO}:pull,push`], "one token, asked for pull and push");
});

test("pushBlob: a blob the registry holds is not sent again", async (t) => {
  const { registry, client, repo } = await setup(t);
  const digest = registry.putBlob(LAYER);
  assert.deepEqual(await client.pushBlob(repo, digest, LAYER), { uploaded: false });
  assert.deepEqual(writes(registry), []);
});

test("pushBlob: bytes that do not hash to the digest, or a digest that is not one, are refused before any request", async (t) => {
  const { registry, client, repo } = await setup(t);
  await assert.rejects(client.pushBlob(repo, sha256("other"), LAYER), {
    name: "RegistryUsageError",
    code: "body-digest-mismatch",
    message: /pushBlob: the body does not hash to sha256:/,
  });
  await assert.rejects(client.pushBlob(repo, "md5:abc", LAYER), {
    name: "RegistryUsageError",
    code: "invalid-digest",
    message: /pushBlob: "md5:abc" is not a sha256 or sha512 digest/,
  });
  assert.deepEqual(registry.requests, []);
});

test("a user the token service lets pull but not push is refused with code unauthorized; nothing is written", async (t) => {
  const { registry, client, repo } = await setup(t, "reader");
  const rejected = await rejection(client.pushBlob(repo, sha256(LAYER), LAYER));
  assert.equal(rejected.code, "unauthorized", rejected.message);
  assert.match(rejected.message, /test reader \(refused by 127\.0\.0\.1:\d+: HTTP 401\)/);
  assert.equal(registry.blobs.size, 0);
  const manifest = imageManifest("refused");
  assert.equal((await rejection(client.pushManifest(repo, "v1", OCI_MANIFEST, manifest))).code, "unauthorized");
  assert.equal(registry.manifests.size, 0);
});

/** A registry answering one route itself. */
const answering = (route: RegExp, method: string, respond: (res: ServerResponse) => void) => ({
  intercept: (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== method || !route.test(new URL(req.url ?? "/", "http://x").pathname)) return false;
    respond(res);
    return true;
  },
});

test("pushBlob: a HEAD that answers neither 200 nor 404 fails with the registry's status", async (t) => {
  const { client, repo } = await setup(
    t,
    "pusher",
    answering(/\/blobs\/sha256:/, "HEAD", (res) => json(res, 503, {})),
  );
  const rejected = await rejection(client.pushBlob(repo, sha256(LAYER), LAYER));
  assert.equal(rejected.code, "unavailable");
  assert.match(rejected.message, /HEAD blob sha256:/);
});

test("pushBlob: an upload refused at POST, or opened without a Location, fails and sends no bytes", async (t) => {
  const refused = await setup(
    t,
    "pusher",
    answering(/\/blobs\/uploads\/$/, "POST", (res) => json(res, 400, { errors: [{ code: "DENIED", message: "no uploads here" }] })),
  );
  const first = await rejection(refused.client.pushBlob(refused.repo, sha256(LAYER), LAYER));
  assert.match(first.message, /opening the upload of blob sha256:.*no uploads here/);
  assert.equal(refused.registry.requests.filter((r) => r.method === "PUT").length, 0);

  const noLocation = await setup(
    t,
    "pusher",
    answering(/\/blobs\/uploads\/$/, "POST", (res) => {
      res.writeHead(202);
      res.end();
    }),
  );
  const second = await rejection(noLocation.client.pushBlob(noLocation.repo, sha256(LAYER), LAYER));
  assert.equal(second.code, "protocol");
  assert.match(second.message, /opened an upload without a Location/);
  assert.deepEqual([second.registry, second.repository, second.endpoint], [noLocation.registry.host, REPO, noLocation.registry.host]);
  assert.equal(noLocation.registry.requests.filter((r) => r.method === "PUT").length, 0);
});

test("pushBlob: a POST answered with another status than 202 fails even with a Location; a Location that is no URL is a protocol error", async (t) => {
  const ok = await setup(
    t,
    "pusher",
    answering(/\/blobs\/uploads\/$/, "POST", (res) => {
      res.writeHead(200, { location: "/v2/team/app/blobs/uploads/x" });
      res.end();
    }),
  );
  const notOpened = await rejection(ok.client.pushBlob(ok.repo, sha256(LAYER), LAYER));
  assert.match(notOpened.message, /opening the upload of blob sha256:[0-9a-f]{64} at 127\.0\.0\.1:\d+ returned HTTP 200/);
  assert.equal(ok.registry.requests.filter((r) => r.method === "PUT").length, 0);

  const invalid = await setup(
    t,
    "pusher",
    answering(/\/blobs\/uploads\/$/, "POST", (res) => {
      res.writeHead(202, { location: "https://[not-a-host/upload" });
      res.end();
    }),
  );
  const bad = await rejection(invalid.client.pushBlob(invalid.repo, sha256(LAYER), LAYER));
  assert.equal(bad.code, "protocol");
  assert.match(bad.message, /^127\.0\.0\.1:\d+\/team\/app: 127\.0\.0\.1:\d+ opened an upload at an invalid Location$/);
  assert.deepEqual([bad.registry, bad.repository, bad.endpoint], [invalid.registry.host, REPO, invalid.registry.host]);
});

test("pushBlob: an upload the registry does not finish with 201 fails with its answer", async (t) => {
  const { client, repo } = await setup(
    t,
    "pusher",
    answering(/\/blobs\/uploads\/[0-9a-f]+$/, "PUT", (res) => json(res, 400, { errors: [{ code: "DIGEST_INVALID", message: "digest did not match" }] })),
  );
  const rejected = await rejection(client.pushBlob(repo, sha256(LAYER), LAYER));
  assert.match(rejected.message, /uploading blob sha256:.*DIGEST_INVALID: digest did not match/);
});

test("pushManifest: PUT under the tag with the manifest's media type; the digest is returned once the registry's agrees", async (t) => {
  const { registry, client, repo } = await setup(t);
  const manifest = imageManifest("pushed");
  assert.equal(await client.pushManifest(repo, "v1", OCI_MANIFEST, manifest), sha256(manifest));
  assert.deepEqual(registry.manifests.get(`${REPO}:v1`), { body: manifest, mediaType: OCI_MANIFEST, digest: sha256(manifest) });
  const put = writes(registry)[0]!;
  assert.equal(put.url, `/v2/${REPO}/manifests/v1`);
  assert.equal(put.contentType, OCI_MANIFEST);
  // The registry stores a manifest under the type the PUT names: an index must go as an index.
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [] }));
  await client.pushManifest(repo, "multi", OCI_INDEX, index);
  assert.equal(registry.manifests.get(`${REPO}:multi`)?.mediaType, OCI_INDEX);
});

test("pushManifest: a registry that says it stored another digest, or refuses the PUT, fails", async (t) => {
  const lying = await setup(
    t,
    "pusher",
    answering(/\/manifests\/v1$/, "PUT", (res) => {
      res.writeHead(201, { "docker-content-digest": sha256("something else") });
      res.end();
    }),
  );
  const mismatch = await rejection(lying.client.pushManifest(lying.repo, "v1", OCI_MANIFEST, imageManifest("x")));
  assert.equal(mismatch.code, "digest-mismatch");
  assert.deepEqual([mismatch.registry, mismatch.repository, mismatch.endpoint], [lying.registry.host, REPO, lying.registry.host]);
  assert.match(mismatch.message, /pushed manifest sha256:[0-9a-f]{64}, 127\.0\.0\.1:\d+ says it stored sha256:/);

  const silent = await setup(
    t,
    "pusher",
    answering(/\/manifests\/v1$/, "PUT", (res) => {
      res.writeHead(201);
      res.end();
    }),
  );
  const manifest = imageManifest("y");
  assert.equal(await silent.client.pushManifest(silent.repo, "v1", OCI_MANIFEST, manifest), sha256(manifest), "no digest header: the computed one");

  const refused = await setup(
    t,
    "pusher",
    answering(/\/manifests\/v1$/, "PUT", (res) => json(res, 400, { errors: [{ code: "MANIFEST_INVALID", message: "bad" }] })),
  );
  const invalid = await rejection(refused.client.pushManifest(refused.repo, "v1", OCI_MANIFEST, imageManifest("z")));
  assert.match(invalid.message, /pushing manifest v1 at 127\.0\.0\.1:\d+ returned HTTP 400 \(MANIFEST_INVALID: bad\)/);
});

test("pushes go to the registry itself, never to its mirror", async (t) => {
  const origin = await FakeRegistry.start({ https: true });
  const mirror = await FakeRegistry.start({ https: true });
  const client = await clientThroughMirror(t, origin, mirror);
  const repo = { registry: origin.host, repository: REPO };
  await client.pushBlob(repo, sha256(LAYER), LAYER);
  await client.pushManifest(repo, "v1", OCI_MANIFEST, imageManifest("m"));
  assert.deepEqual(mirror.requests, []);
  assert.ok(origin.blobs.has(sha256(LAYER)));
  assert.ok(origin.manifests.has(`${REPO}:v1`));
});
