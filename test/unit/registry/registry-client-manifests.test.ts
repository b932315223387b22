// Manifests: resolving tags to verified digests, indexes, digest checks and size limits. The registry is the
// in-process FakeRegistry (see fake-registry.ts for why): a lying registry that alters a body but keeps its
// Docker-Content-Digest, or streams an oversized body, is exactly what a real registry will not do.
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { RegistryClient, type RegistryClientOptions } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, OCI_INDEX, OCI_MANIFEST, imageManifest, sha256, sha512, testTls, type FakeRegistry as Registry } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";

async function setup(
  t: TestContext,
  intercept?: (req: IncomingMessage, res: ServerResponse, registry: Registry) => boolean,
  clientOptions: RegistryClientOptions = {},
) {
  const registry = await FakeRegistry.start({ https: true, ...(intercept ? { intercept } : {}) });
  const { caPem } = await testTls();
  const client = new RegistryClient({ settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]), ...clientOptions });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  const ref = (reference: { tag?: string; digest?: string }) => ({ registry: registry.host, repository: REPO, ...reference });
  return { registry, client, ref };
}

test("resolveDigest: a single-platform tag resolves to its manifest's digest", async (t) => {
  const { registry, client, ref } = await setup(t);
  const body = imageManifest("single");
  const digest = registry.putManifest(REPO, "v1", body);
  assert.deepEqual(await client.resolveDigest(ref({ tag: "v1" })), {
    digest,
    mediaType: OCI_MANIFEST,
    size: body.length,
    endpoint: registry.host,
    credentialSource: "anonymous",
  });
});

test("resolveDigest: a multi-platform tag resolves to the index, whose platform manifests are reachable by digest", async (t) => {
  const { registry, client, ref } = await setup(t);
  const amd64 = imageManifest("amd64");
  const arm = imageManifest("arm");
  const amd64Digest = registry.putManifest(REPO, undefined, amd64);
  const armDigest = registry.putManifest(REPO, undefined, arm);
  const index = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [
        { mediaType: OCI_MANIFEST, digest: amd64Digest, size: amd64.length, platform: { os: "linux", architecture: "amd64" } },
        { mediaType: OCI_MANIFEST, digest: armDigest, size: arm.length, platform: { os: "linux", architecture: "arm", variant: "v7" } },
      ],
    }),
  );
  const indexDigest = registry.putManifest(REPO, "multi", index, OCI_INDEX);

  const resolved = await client.resolveDigest(ref({ tag: "multi" }));
  assert.equal(resolved.digest, indexDigest);
  assert.equal(resolved.mediaType, OCI_INDEX);
  assert.deepEqual(resolved.manifests, [
    { mediaType: OCI_MANIFEST, digest: amd64Digest, size: amd64.length, platform: { os: "linux", architecture: "amd64" } },
    { mediaType: OCI_MANIFEST, digest: armDigest, size: arm.length, platform: { os: "linux", architecture: "arm", variant: "v7" } },
  ]);
  const platform = await client.getManifest(ref({ digest: resolved.manifests![1]!.digest }));
  assert.equal(platform.digest, armDigest);
  assert.deepEqual(platform.body, arm);
});

test("a reference with a digest resolves to itself after a verified GET by digest (sha256 and sha512)", async (t) => {
  const { registry, client, ref } = await setup(t);
  const body = imageManifest("pinned");
  const digest = registry.putManifest(REPO, "v1", body);
  const pinned = await client.resolveDigest(ref({ tag: "ignored-when-a-digest-is-given", digest }));
  assert.equal(pinned.digest, digest);
  assert.ok(registry.requests.some((r) => r.url === `/v2/${REPO}/manifests/${digest}`));

  const long = sha512(body);
  assert.equal((await client.resolveDigest(ref({ digest: long }))).digest, long);
});

test("a registry that alters a manifest but keeps its Docker-Content-Digest is caught", async (t) => {
  const original = imageManifest("original");
  const { registry, client, ref } = await setup(t, (req, res, self) => {
    if (!req.url?.includes("/manifests/")) return false;
    const entry = self.manifests.get(`${REPO}:v1`)!;
    const altered = Buffer.from(JSON.stringify({ ...JSON.parse(entry.body.toString()), annotations: { injected: "yes" } }));
    res.writeHead(200, { "content-type": OCI_MANIFEST, "docker-content-digest": entry.digest, "content-length": altered.length });
    res.end(altered);
    return true;
  });
  const digest = registry.putManifest(REPO, "v1", original);
  for (const reference of [{ tag: "v1" }, { digest }]) {
    const error = await rejection(client.resolveDigest(ref(reference)));
    assert.equal(error.code, "digest-mismatch");
    assert.equal(error.retryable, false);
    assert.match(error.message, new RegExp(`but its Docker-Content-Digest is ${digest}: the registry's body does not match its digest: tampered or broken`));
  }
});

test("fetched by digest, the body must hash to the requested digest even without Docker-Content-Digest", async (t) => {
  const { client, ref } = await setup(t, (req, res) => {
    if (!req.url?.includes("/manifests/")) return false;
    const other = imageManifest("something else");
    res.writeHead(200, { "content-type": OCI_MANIFEST, "content-length": other.length });
    res.end(other);
    return true;
  });
  const wanted = sha256(imageManifest("wanted"));
  const error = await rejection(client.getManifest(ref({ digest: wanted })));
  assert.equal(error.code, "digest-mismatch");
  assert.match(error.message, new RegExp(`hashes to ${sha256(imageManifest("something else"))}, but the requested digest is ${wanted}`));
});

test("too-large manifests are refused, by Content-Length and by counting when there is none", async (t) => {
  const big = Buffer.alloc(2048, " ");
  const { client, ref } = await setup(
    t,
    (req, res) => {
      if (req.url?.endsWith("/manifests/declared")) {
        res.writeHead(200, { "content-type": OCI_MANIFEST, "content-length": big.length });
        res.end(big);
        return true;
      }
      if (req.url?.endsWith("/manifests/chunked")) {
        res.writeHead(200, { "content-type": OCI_MANIFEST }); // no Content-Length: chunked, length unknown until read
        res.write(big.subarray(0, 1000));
        res.end(big.subarray(1000));
        return true;
      }
      return false;
    },
    { maxManifestBytes: 1024 },
  );
  const declared = await rejection(client.getManifest(ref({ tag: "declared" })));
  assert.equal(declared.code, "too-large");
  assert.match(declared.message, /manifest declared from .* is 2048 bytes \(Content-Length\); the limit is 1024 bytes/);
  const chunked = await rejection(client.getManifest(ref({ tag: "chunked" })));
  assert.equal(chunked.code, "too-large");
  assert.match(chunked.message, /is more than 1024 bytes \(counted while reading\)/);
});

test("the Accept header asks for OCI and Docker manifests and indexes", async (t) => {
  let accept: string | undefined;
  const { registry, client, ref } = await setup(t, (req) => {
    if (req.url?.includes("/manifests/")) accept = req.headers.accept;
    return false;
  });
  registry.putManifest(REPO, "v1", imageManifest("v1"));
  await client.getManifest(ref({ tag: "v1" }));
  assert.deepEqual(accept?.split(", ").sort(), [
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
  ]);
});

test("headManifest returns the announced digest, media type and size", async (t) => {
  const { registry, client, ref } = await setup(t);
  const body = imageManifest("head");
  const digest = registry.putManifest(REPO, "v1", body);
  assert.deepEqual(await client.headManifest(ref({ tag: "v1" })), {
    digest,
    mediaType: OCI_MANIFEST,
    size: body.length,
    endpoint: registry.host,
    credentialSource: "anonymous",
  });
  assert.equal(registry.requests.at(-1)!.method, "HEAD");
});

test("a missing manifest is 'not-found' with the registry's error code; a failing registry is 'unavailable'", async (t) => {
  const { client, ref, registry } = await setup(t, (req, res) => {
    if (!req.url?.endsWith("/manifests/broken")) return false;
    res.writeHead(503, { "retry-after": "30" });
    res.end();
    return true;
  });
  const missing = await rejection(client.getManifest(ref({ tag: "nope" })));
  assert.equal(missing.code, "not-found");
  assert.equal(missing.status, 404);
  assert.equal(
    missing.message,
    `${registry.host}/${REPO}: not found: manifest nope at ${registry.host} returned HTTP 404 (MANIFEST_UNKNOWN: manifest unknown)`,
  );
  const broken = await rejection(client.getManifest(ref({ tag: "broken" })));
  assert.equal(broken.code, "unavailable");
  assert.equal(broken.retryable, true);
  assert.match(broken.message, /returned HTTP 503; retry after 30$/);
});

test("a body served as an index but declaring itself an image manifest is refused", async (t) => {
  const { client, ref } = await setup(t, (req, res) => {
    if (!req.url?.includes("/manifests/")) return false;
    const body = imageManifest("confused");
    res.writeHead(200, { "content-type": OCI_INDEX, "content-length": body.length });
    res.end(body);
    return true;
  });
  const error = await rejection(client.getManifest(ref({ tag: "v1" })));
  assert.equal(error.code, "protocol");
  assert.match(
    error.message,
    /the Content-Type is application\/vnd\.oci\.image\.index\.v1\+json but the manifest says it is application\/vnd\.oci\.image\.manifest\.v1\+json/,
  );
});

test("a connection reset in the middle of a manifest is no answer ('unreachable', retryable), never a short manifest", async (t) => {
  const body = imageManifest("reset");
  const { client, ref } = await setup(t, (req, res) => {
    if (!req.url?.endsWith("/manifests/reset")) return false;
    res.writeHead(200, { "content-type": OCI_MANIFEST, "content-length": body.length });
    res.write(body.subarray(0, Math.floor(body.length / 2)), () => res.socket?.destroy());
    return true;
  });
  const reset = await rejection(client.getManifest(ref({ tag: "reset" })));
  assert.equal(reset.code, "unreachable", reset.message);
  assert.equal(reset.retryable, true);
});
