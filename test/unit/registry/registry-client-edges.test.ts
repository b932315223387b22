// The registry client at its edges: what a HEAD promises (and how a lying one is caught), blobs and referrers
// the registry refuses or garbles, the headers each request carries, the Referrers API's pages and its
// remembered absence, mirrors and the caller's deadline, and which credential a response is credited to.
// The registry is the in-process FakeRegistry (see fake-registry.ts for why: these registries misbehave on purpose).
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RegistryCredential } from "../../../src/credentials/credential.ts";
import { RegistryClient, type RegistryClientOptions } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { referrersTag } from "../../../src/registry/referrers.ts";
import { FakeRegistry, OCI_INDEX, OCI_MANIFEST, imageManifest, json, sha256, testTls, type FakeRegistryOptions, clientThroughMirror } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const SUBJECT = `sha256:${"a".repeat(64)}`;
const alice: RegistryCredential = { source: "secret team/alice", username: "alice", password: "alice-password" };
const descriptor = (n: number) => ({
  mediaType: OCI_MANIFEST,
  digest: `sha256:${String(n).repeat(64).slice(0, 64)}`,
  size: 100 + n,
  artifactType: "application/vnd.dev.sigstore.bundle.v0.3+json",
});
const index = (manifests: unknown[]) => ({ schemaVersion: 2, mediaType: OCI_INDEX, manifests });

type Intercept = (req: IncomingMessage, res: ServerResponse) => boolean;

async function setup(t: TestContext, intercept?: Intercept, clientOptions: RegistryClientOptions = {}, registryOptions: FakeRegistryOptions = {}) {
  const registry = await FakeRegistry.start({ https: true, ...registryOptions, ...(intercept ? { intercept } : {}) });
  const { caPem } = await testTls();
  const client = new RegistryClient({ settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]), ...clientOptions });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, repo: { registry: registry.host, repository: REPO } };
}

/** Answers requests whose path starts with `prefix` with `respond`. */
const on =
  (prefix: string, respond: (req: IncomingMessage, res: ServerResponse) => void): Intercept =>
  (req, res) => {
    if (!req.url?.startsWith(prefix)) return false;
    respond(req, res);
    return true;
  };

test("HEAD by digest: a Docker-Content-Digest other than the one asked for is a digest mismatch", async (t) => {
  const other = sha256("other");
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/manifests/`, (_req, res) => {
      res.writeHead(200, { "docker-content-digest": other, "content-type": OCI_MANIFEST });
      res.end();
    }),
  );
  const asked = sha256("asked");
  const error = await rejection(client.headManifest({ ...repo, digest: asked }));
  assert.equal(error.code, "digest-mismatch");
  assert.equal(error.endpoint, registry.host);
  assert.equal(error.message, `${registry.host}/${REPO}: asked ${registry.host} for ${asked}, its Docker-Content-Digest says ${other}`);
  // Asked by the digest it announces, HEAD succeeds with it.
  assert.equal((await client.headManifest({ ...repo, digest: other })).digest, other);
  // Asked by tag, the announced digest is reported as it is (HEAD has no body to check).
  assert.equal((await client.headManifest({ ...repo, tag: "v1" })).digest, other);
});

test("a Docker-Content-Digest that is not a digest is a protocol error, for HEAD and GET", async (t) => {
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/manifests/`, (req, res) => {
      const body = imageManifest("x");
      res.writeHead(200, { "docker-content-digest": "md5:abc", "content-type": OCI_MANIFEST, "content-length": body.length });
      res.end(req.method === "HEAD" ? undefined : body);
    }),
  );
  for (const call of [client.headManifest({ ...repo, tag: "v1" }), client.getManifest({ ...repo, tag: "v1" })]) {
    const error = await rejection(call);
    assert.equal(error.code, "protocol");
    assert.equal(error.endpoint, registry.host);
    assert.equal(error.message, `${registry.host}/${REPO}: ${registry.host} sent a Docker-Content-Digest that is not a sha256 or sha512 digest`);
  }
});

test("HEAD reports only what the registry sent: no digest, type or size when absent", async (t) => {
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/manifests/`, (_req, res) => {
      res.statusCode = 200;
      res.end();
    }),
  );
  assert.deepEqual(await client.headManifest({ ...repo, tag: "v1" }), { endpoint: registry.host, credentialSource: "anonymous" });
});

test("HEAD refused: the error names the HEAD", async (t) => {
  const { client, repo, registry } = await setup(t);
  const error = await rejection(client.headManifest({ ...repo, tag: "nope" }));
  assert.equal(error.code, "not-found");
  assert.equal(error.message, `${registry.host}/${REPO}: not found: HEAD manifest nope at ${registry.host} returned HTTP 404`);
});

test("blobs: a digest that is not one is refused before any request; a missing blob is not-found; the size limit names the blob", async (t) => {
  const { client, repo, registry } = await setup(t);
  await assert.rejects(client.getBlob(repo, "md5:abc"), {
    name: "RegistryUsageError",
    code: "invalid-digest",
    message: 'getBlob: "md5:abc" is not a sha256 or sha512 digest',
  });
  assert.equal(registry.requests.length, 0);
  const missing = sha256("missing");
  const error = await rejection(client.getBlob(repo, missing));
  assert.equal(error.code, "not-found");
  assert.ok(error.message.endsWith(`not found: blob ${missing} at ${registry.host} returned HTTP 404 (BLOB_UNKNOWN: blob unknown)`), error.message);
  const big = registry.putBlob(Buffer.alloc(64, 1));
  const tooBig = await rejection(client.getBlob(repo, big, { maxBytes: 10 }));
  assert.match(tooBig.message, new RegExp(`blob ${big}`));
});

test("a tampered blob's digest mismatch names the endpoint", async (t) => {
  const body = Buffer.from("the real layer");
  const digest = sha256(body);
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/blobs/`, (_req, res) => {
      res.end("a tampered layer");
    }),
  );
  const error = await rejection(client.getBlob(repo, digest));
  assert.equal(error.code, "digest-mismatch");
  assert.equal(error.endpoint, registry.host);
  assert.equal(error.repository, REPO);
});

test("a manifest that is not what it declares is a protocol error naming the endpoint", async (t) => {
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/manifests/`, (_req, res) => {
      const body = imageManifest("confused");
      res.writeHead(200, { "content-type": OCI_INDEX, "content-length": body.length });
      res.end(body);
    }),
  );
  const error = await rejection(client.getManifest({ ...repo, tag: "v1" }));
  assert.equal(error.code, "protocol");
  assert.equal(error.endpoint, registry.host);
});

test("a manifest whose bytes do not match its Docker-Content-Digest names the endpoint", async (t) => {
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/manifests/`, (_req, res) => {
      const body = imageManifest("served");
      res.writeHead(200, { "content-type": OCI_MANIFEST, "docker-content-digest": sha256("promised"), "content-length": body.length });
      res.end(body);
    }),
  );
  const error = await rejection(client.getManifest({ ...repo, tag: "v1" }));
  assert.equal(error.code, "digest-mismatch");
  assert.equal(error.endpoint, registry.host);
});

test("Accept: manifests ask for manifests, the Referrers API for an index, blobs for nothing in particular", async (t) => {
  const accepts = new Map<string, string | undefined>();
  const { client, repo, registry } = await setup(t, (req) => {
    const kind = /\/(manifests|blobs|referrers)\//.exec(req.url ?? "")?.[1];
    if (kind) accepts.set(kind, req.headers.accept);
    return false;
  });
  registry.putManifest(REPO, "v1", imageManifest("v1"));
  const blob = registry.putBlob(Buffer.from("layer"));
  await client.getManifest({ ...repo, tag: "v1" });
  await client.getBlob(repo, blob);
  await client.listReferrers(repo, SUBJECT);
  assert.match(accepts.get("manifests") ?? "", /application\/vnd\.oci\.image\.manifest\.v1\+json/);
  assert.equal(accepts.get("referrers"), OCI_INDEX);
  assert.doesNotMatch(accepts.get("blobs") ?? "", /vnd\.oci|vnd\.docker/);
});

test("an open registry is credited to nobody, even when a credential is configured, and is sent none", async (t) => {
  const { client, repo, registry } = await setup(t, undefined, { credentials: () => [alice] });
  registry.putManifest(REPO, "v1", imageManifest("v1"));
  assert.equal((await client.getManifest({ ...repo, tag: "v1" })).credentialSource, "anonymous");
  assert.ok(registry.requests.every((r) => r.authorization === undefined));
});

test("a 403 is not retried: the cached token is not dropped and replaced", async (t) => {
  let forbid = false;
  const { client, repo, registry } = await setup(
    t,
    (req, res) => {
      if (!forbid || !req.url?.includes("/manifests/")) return false;
      json(res, 403, { errors: [{ code: "DENIED" }] });
      return true;
    },
    { credentials: () => [alice] },
    { auth: "bearer", users: { alice: { password: alice.password! } } },
  );
  registry.putManifest(REPO, "v1", imageManifest("v1"));
  await client.getManifest({ ...repo, tag: "v1" });
  forbid = true;
  const before = registry.requests.length;
  const error = await rejection(client.getManifest({ ...repo, tag: "v1" }));
  assert.equal(error.code, "unauthorized");
  assert.ok(error.message.endsWith(`tried secret team/alice (refused by ${registry.host}: HTTP 403)`), error.message);
  assert.equal(registry.requests.length - before, 1, "one request, no new token");
});

test("a 401 without a usable challenge refuses the credential", async (t) => {
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/manifests/`, (_req, res) => json(res, 401, {})),
    { credentials: () => [alice] },
  );
  const error = await rejection(client.getManifest({ ...repo, tag: "v1" }));
  assert.equal(error.code, "unauthorized");
  assert.ok(error.message.endsWith(`tried secret team/alice (refused by ${registry.host}: HTTP 401)`), error.message);
});

test("referrers: a digest that is not one is refused before any request", async (t) => {
  const { client, repo, registry } = await setup(t);
  await assert.rejects(client.listReferrers(repo, "sha1:abc"), {
    name: "RegistryUsageError",
    code: "invalid-digest",
    message: 'listReferrers: "sha1:abc" is not a sha256 or sha512 digest',
  });
  assert.equal(registry.requests.length, 0);
});

test("referrers: the API is asked without a query unless filtering, and an index without mediaType is taken on its Content-Type", async (t) => {
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/referrers/`, (_req, res) => {
      const text = JSON.stringify({ schemaVersion: 2, manifests: [descriptor(1)] });
      res.writeHead(200, { "content-type": OCI_INDEX, "content-length": Buffer.byteLength(text) });
      res.end(text);
    }),
  );
  const found = await client.listReferrers(repo, SUBJECT);
  assert.deepEqual([found.source, found.descriptors.length], ["api", 1]);
  assert.equal(registry.requests.at(-1)!.url, `/v2/${REPO}/referrers/${SUBJECT}`);
});

test("referrers: a relative next page resolves against the page that named it", async (t) => {
  const { client, repo } = await setup(
    t,
    on(`/v2/${REPO}/referrers/`, (req, res) => {
      if (!req.url!.includes("?")) res.setHeader("link", `<./${SUBJECT}?last=1>; rel="next"`);
      json(res, 200, index([descriptor(req.url!.includes("?") ? 2 : 1)]));
    }),
  );
  assert.deepEqual(
    (await client.listReferrers(repo, SUBJECT)).descriptors.map((d) => d.size),
    [101, 102],
  );
});

test("referrers: endless pages stop at ten; a later page missing or not an index is an error, not a missing API", async (t) => {
  let later: (res: ServerResponse) => void = () => {};
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/referrers/`, (req, res) => {
      const page = Number(new URL(req.url!, "http://x").searchParams.get("page") ?? "1");
      if (page > 1) return later(res);
      res.setHeader("link", `</v2/${REPO}/referrers/${SUBJECT}?page=${page + 1}>; rel="next"`);
      json(res, 200, index([descriptor(page)]));
    }),
  );
  later = (res) => json(res, 404, { errors: [{ code: "NAME_UNKNOWN" }] });
  const missing = await rejection(client.listReferrers(repo, SUBJECT));
  assert.equal(missing.code, "not-found");
  later = (res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<html>");
  };
  const html = await rejection(client.listReferrers(repo, SUBJECT));
  assert.equal(html.code, "protocol");
  assert.ok(html.message.endsWith(`referrers of ${SUBJECT} from ${registry.host}: page 2 is a text/html that is not JSON`), html.message);
  assert.equal(html.endpoint, registry.host);

  const endless = await setup(
    t,
    on(`/v2/${REPO}/referrers/`, (req, res) => {
      const page = Number(new URL(req.url!, "http://x").searchParams.get("page") ?? "1");
      res.setHeader("link", `</v2/${REPO}/referrers/${SUBJECT}?page=${page + 1}>; rel="next"`);
      json(res, 200, index([descriptor(page % 10)]));
    }),
  );
  const tooMany = await rejection(endless.client.listReferrers(endless.repo, SUBJECT));
  assert.equal(tooMany.code, "protocol");
  assert.ok(tooMany.message.endsWith(`more than 10 pages`), tooMany.message);
  assert.equal(endless.registry.requests.filter((r) => r.url.includes("/referrers/")).length, 10);
});

test("referrers tag: refused, oversized, tampered or garbled tag indexes are errors with codes", async (t) => {
  const tag = referrersTag(SUBJECT);
  let serve: (res: ServerResponse) => void = () => {};
  const { client, repo, registry } = await setup(
    t,
    (req, res) => {
      if (req.url!.includes("/referrers/")) {
        json(res, 404, {});
        return true;
      }
      if (!req.url!.endsWith(`/manifests/${tag}`)) return false;
      serve(res);
      return true;
    },
    { maxManifestBytes: 1000 },
  );
  serve = (res) => json(res, 500, {});
  const failing = await rejection(client.listReferrers(repo, SUBJECT));
  assert.equal(failing.code, "unavailable");
  assert.ok(failing.message.endsWith(`referrers tag ${tag} at ${registry.host} returned HTTP 500`), failing.message);

  serve = (res) => json(res, 200, { ...index([]), padding: "x".repeat(2000) });
  assert.match((await rejection(client.listReferrers(repo, SUBJECT))).message, new RegExp(`referrers tag ${tag}`));

  const body = Buffer.from(JSON.stringify(index([descriptor(1)])));
  serve = (res) => {
    res.writeHead(200, { "content-type": OCI_INDEX, "docker-content-digest": sha256("another index"), "content-length": body.length });
    res.end(body);
  };
  assert.equal((await rejection(client.listReferrers(repo, SUBJECT))).code, "digest-mismatch");

  serve = (res) => json(res, 200, { schemaVersion: 2, mediaType: OCI_INDEX, manifests: "none" });
  const garbled = await rejection(client.listReferrers(repo, SUBJECT));
  assert.equal(garbled.code, "protocol");
  assert.equal(garbled.endpoint, registry.host);
  assert.match(garbled.message, new RegExp(`: referrers tag ${tag} from ${registry.host.replace(".", "\\.")}: `));
});

test("a repository without the Referrers API is asked again exactly when the minute is up", async (t) => {
  let now = 1_000_000;
  const { client, repo, registry } = await setup(
    t,
    on(`/v2/${REPO}/referrers/`, (_req, res) => json(res, 404, {})),
    { now: () => now },
  );
  const probes = () => registry.requests.filter((r) => r.url.includes("/referrers/")).length;
  await client.listReferrers(repo, SUBJECT);
  now += 59_999;
  await client.listReferrers(repo, SUBJECT);
  assert.equal(probes(), 1);
  now += 1;
  await client.listReferrers(repo, SUBJECT);
  assert.equal(probes(), 2);
});

test("the memory of repositories without the Referrers API is bounded, oldest first, a re-probed one counting as new", async (t) => {
  let now = 0;
  const { client, registry } = await setup(
    t,
    (req, res) => {
      if (!req.url!.includes("/referrers/") && !req.url!.includes("/manifests/")) return false;
      json(res, 404, {});
      return true;
    },
    { now: () => now },
  );
  const probed = (n: number) => registry.requests.filter((r) => r.url.startsWith(`/v2/r/${n}/referrers/`)).length;
  const list = (n: number) => client.listReferrers({ registry: registry.host, repository: `r/${n}` }, SUBJECT);
  await list(0);
  await list(1);
  await list(0);
  assert.equal(probed(0), 1, "two repositories are both remembered");
  for (let n = 2; n < 1023; n++) await list(n); // 1023 remembered, one below the bound
  now = 60_000; // all expired: r/0 is probed again and remembered anew, as the newest
  await list(0);
  assert.equal(probed(0), 2);
  await list(1023); // the bound
  await list(1024); // one over: the oldest (r/1, not the re-probed r/0) goes
  await list(0);
  assert.equal(probed(0), 2, "the re-probed repository is still remembered");
  for (let n = 1025; n < 2049; n++) await list(n); // 1024 more, all live: just enough to push r/1024 out
  await list(1024);
  assert.equal(probed(1024), 2, "a live entry beyond the bound is forgotten");
});

test("a mirror's answer with referrers is final: the registry is not asked", async (t) => {
  const answering = (n: number): Intercept => on(`/v2/${REPO}/referrers/`, (_req, res) => json(res, 200, index(n ? [descriptor(n)] : [])));
  const origin = await FakeRegistry.start({ https: true, intercept: answering(1) });
  const mirror = await FakeRegistry.start({ https: true, intercept: answering(2) });
  const client = await clientThroughMirror(t, origin, mirror);
  const found = await client.listReferrers({ registry: origin.host, repository: REPO }, SUBJECT);
  assert.deepEqual([found.endpoint, found.descriptors.map((d) => d.size)], [mirror.host, [102]]);
  assert.equal(origin.requests.length, 0);
});

test("the caller's deadline passing at a mirror ends the call there: the registry is not asked", async (t) => {
  const origin = await FakeRegistry.start({ https: true });
  const mirror = await FakeRegistry.start({ https: true, intercept: on(`/v2/${REPO}/`, () => {}) });
  origin.putManifest(REPO, "v1", imageManifest("v1"));
  const client = await clientThroughMirror(t, origin, mirror, { requestTimeoutMs: 2000 });
  const error = await rejection(client.getManifest({ registry: origin.host, repository: REPO, tag: "v1" }, { signal: AbortSignal.timeout(200) }));
  assert.equal(error.code, "timeout");
  assert.doesNotMatch(error.message, /every endpoint failed/);
  assert.equal(origin.requests.length, 0);
});

test("a registry that answers every request with another challenge is retried once, not forever", async (t) => {
  let flip = false;
  // Two names of the same token service, alternating: each challenge names the realm not named last.
  const nextRealm = (port: number) => {
    flip = !flip;
    return `https://${flip ? "127.0.0.1" : "localhost"}:${port}/token`;
  };
  const registry = await FakeRegistry.start({
    https: true,
    auth: "bearer",
    users: { alice: { password: alice.password! } },
    realm: (self) => nextRealm(self.port),
    intercept: (req, res) => {
      if (!req.url?.includes("/manifests/")) return false;
      res.setHeader("www-authenticate", `Bearer realm="${nextRealm(registry.server.port)}"`);
      json(res, 401, {});
      return true;
    },
  });
  const { caPem } = await testTls();
  const client = new RegistryClient({
    settings: registrySettingsMap([
      { host: registry.host, ca: caPem, allowLocalAddresses: true },
      { host: `localhost:${registry.server.port}`, allowLocalAddresses: true },
    ]),
    credentials: () => [alice],
  });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  const error = await rejection(client.getManifest({ registry: registry.host, repository: REPO, tag: "v1" }));
  assert.equal(error.code, "unauthorized");
  assert.equal(registry.requests.filter((r) => r.url.includes("/manifests/")).length, 2);
});
