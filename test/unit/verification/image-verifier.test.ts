// The verifier's cache and sharing rules, with an in-memory signature store standing in for the registry (the
// registry paths themselves are tested against docker-registry in test/e2e): results keyed by digest, policy
// rule and credentials; denials kept briefly; outages never kept; concurrent admissions share one lookup;
// a policy reload forgets everything.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { test } from "node:test";
import type { CredentialLookup } from "../../../src/credentials/credential.ts";
import { RegistryError } from "../../../src/registry/registry-error.ts";
import { ImageVerifier, type VerificationRequest } from "../../../src/verification/image-verifier.ts";
import { attestorsWith } from "../../support/verification-fixtures.ts";

const key = generateKeyPairSync("ec", { namedCurve: "P-256" });
const pem = key.publicKey.export({ type: "spki", format: "pem" }).toString();
const digest = `sha256:${createHash("sha256").update("m").digest("hex")}`;
const payload = Buffer.from(
  JSON.stringify({
    critical: { identity: { "docker-reference": "r.example/app" }, image: { "docker-manifest-digest": digest }, type: "cosign container image signature" },
  }),
);
const payloadDigest = `sha256:${createHash("sha256").update(payload).digest("hex")}`;
const sigManifest = Buffer.from(
  JSON.stringify({
    schemaVersion: 2,
    layers: [
      {
        mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
        digest: payloadDigest,
        size: payload.length,
        annotations: { "dev.cosignproject.cosign/signature": sign("sha256", payload, key.privateKey).toString("base64") },
      },
    ],
  }),
);

/** Signatures in memory: `.sig` by tag, no referrers. Counts lookups; can fail or stall on demand. */
function store(opts: { signed?: boolean; fail?: "unreachable" | "unauthorized"; delayMs?: number } = {}) {
  const calls = { manifests: 0, blobs: 0, referrers: 0 };
  const wait = () => new Promise((r) => setTimeout(r, opts.delayMs ?? 0));
  return {
    calls,
    client: {
      async getManifest(ref: { tag?: string }) {
        calls.manifests++;
        await wait();
        if (opts.fail) throw new RegistryError(opts.fail, `registry ${opts.fail}`);
        if (!opts.signed || !ref.tag?.endsWith(".sig")) throw new RegistryError("not-found", "manifest unknown");
        return {
          digest: "sha256:x",
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          size: sigManifest.length,
          body: sigManifest,
          endpoint: "r.example",
          credentialSource: "anonymous",
        };
      },
      async getBlob(_repo: unknown, d: string) {
        calls.blobs++;
        return { digest: d, body: payload, endpoint: "r.example", credentialSource: "anonymous" };
      },
      async listReferrers() {
        calls.referrers++;
        if (opts.fail) throw new RegistryError(opts.fail, `registry ${opts.fail}`);
        return { descriptors: [], source: "none" as const, endpoint: "r.example", credentialSource: "anonymous" };
      },
    },
  };
}

const attestors = attestorsWith(`{staticKey: {name: release, ignoreTlog: true, key: ${JSON.stringify(pem)}}}`);

const anonymous: CredentialLookup = () => [];
const withSecret: CredentialLookup = () => [{ source: "secret a/b", username: "u", password: "p" }];
function request(lookup: CredentialLookup = anonymous, rule = 0): VerificationRequest {
  return { image: { registry: "r.example", repository: "app", digest }, policy: "p", rule, attestors, lookup };
}
const soon = () => Date.now() + 5_000;

test("a verified result is reused for the same digest, rule and credentials, and only for them", async () => {
  const s = store({ signed: true });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const first = await v.verify(request(), soon());
  assert.equal(first.status, "verified");
  assert.equal((await v.verify(request(), soon())).status, "verified");
  assert.equal(v.verifications, 1);
  assert.equal(v.hits, 1);
  await v.verify(request(withSecret), soon()); // another pod's credentials: looked up again
  await v.verify(request(anonymous, 1), soon()); // another rule
  assert.equal(v.verifications, 3);
  v.clear(); // a policy reload
  await v.verify(request(), soon());
  assert.equal(v.verifications, 4);
});

test("two tags of one digest are one image: verified once (a scan of many pods of few images)", async () => {
  const s = store({ signed: true });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const tagged = (tag: string): VerificationRequest => ({ ...request(), image: { registry: "r.example", repository: "app", tag, digest } });
  assert.equal((await v.verify(tagged("1.0"), soon())).status, "verified");
  assert.equal((await v.verify(tagged("stable"), soon())).status, "verified");
  assert.equal((await v.verify(request(), soon())).status, "verified");
  assert.equal(v.verifications, 1);
  assert.equal(v.hits, 2);
});

test("another digest of the same repository is verified on its own: a verified result never stands for another digest", async () => {
  const s = store({ signed: true });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  assert.equal((await v.verify(request(), soon())).status, "verified");
  // The store's signature names the first digest only, so the second is not signed by it.
  const other = `sha256:${createHash("sha256").update("another build").digest("hex")}`;
  const second = await v.verify({ ...request(), image: { registry: "r.example", repository: "app", digest: other } }, soon());
  assert.equal(second.status, "denied");
  assert.equal(v.verifications, 2);
  assert.equal(v.hits, 0);
});

test("100 concurrent admissions of one new image cost one verification", async () => {
  const s = store({ signed: true, delayMs: 20 });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const results = await Promise.all(Array.from({ length: 100 }, () => v.verify(request(), soon())));
  assert.ok(results.every((r) => r.status === "verified"));
  assert.equal(v.verifications, 1);
  assert.equal(s.calls.manifests, 1);
});

test("a denial is kept only for the deny TTL; an outage is not kept at all", async () => {
  let now = 1_000; // lru-cache treats a start time of 0 as "never stale"
  const unsigned = store({ signed: false });
  const v = new ImageVerifier({ client: unsigned.client, trustRoots: () => new Map(), deniedTtlMs: 1_000, now: () => now });
  const denied = await v.verify(request(), soon());
  assert.equal(denied.status, "denied");
  assert.match(
    denied.status === "denied" ? denied.reason : "",
    /^no signatures found \(looked for cosign tag r\.example\/app:sha256-[0-9a-f]{64}\.sig and Sigstore bundles .*\); attestors\[0\] needs its entry: key release: no signature found$/,
  );
  await v.verify(request(), soon());
  assert.equal(v.verifications, 1);
  now = 2_001;
  await v.verify(request(), soon());
  assert.equal(v.verifications, 2);

  const down = store({ fail: "unreachable" });
  const w = new ImageVerifier({ client: down.client, trustRoots: () => new Map() });
  const result = await w.verify(request(), soon());
  assert.equal(result.status, "unavailable");
  await w.verify(request(), soon());
  assert.equal(w.verifications, 2);
});

test("a registry that refuses the credentials is a denial (its answer), not an outage", async () => {
  const s = store({ fail: "unauthorized" });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const result = await v.verify(request(), soon());
  assert.equal(result.status, "denied");
  assert.match(result.status === "denied" ? result.reason : "", /unreadable: .*registry unauthorized/);
  // Nothing was read, so nothing can be said to be missing: the reason leads with what happened.
  assert.match(result.status === "denied" ? result.reason : "", /^no signature could be read \(looked for cosign tag /);
  assert.doesNotMatch(result.status === "denied" ? result.reason : "", /no signatures found/);
});

test("a registry that hangs past the deadline gives an answer at the deadline", async () => {
  const s = store({ signed: true, delayMs: 2_000 });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const started = Date.now();
  const result = await v.verify(request(), Date.now() + 200);
  assert.equal(result.status, "unavailable");
  assert.ok(Date.now() - started < 1_000);
});

test("attestations: a lookup that timed out makes the result unavailable even when another layout gave a statement", async () => {
  const { cosignAttestationLayer, inTotoStatement } = await import("../../support/signer/cosign-signatures.ts");
  const { generateSigningKey } = await import("../../support/signer/keys.ts");
  const SLSA = "https://slsa.dev/provenance/v1";
  const signer = generateSigningKey("ecdsa-p256");
  const statement = inTotoStatement({ subjectName: "r.example/app", digest, predicateType: SLSA, predicate: { buildType: "x" } });
  const layer = await cosignAttestationLayer({ statement, key: signer });
  const att = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      layers: [
        {
          mediaType: layer.mediaType,
          digest: `sha256:${createHash("sha256").update(layer.blob).digest("hex")}`,
          size: layer.blob.length,
          annotations: layer.annotations,
        },
      ],
    }),
  );
  let referrers: "timeout" | "none" = "timeout";
  const client = {
    async getManifest(ref: { tag?: string }) {
      if (!ref.tag?.endsWith(".att")) throw new RegistryError("not-found", "manifest unknown");
      return {
        digest: "sha256:x",
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        size: att.length,
        body: att,
        endpoint: "r.example",
        credentialSource: "anonymous",
      };
    },
    async getBlob(_repo: unknown, d: string) {
      return { digest: d, body: layer.blob, endpoint: "r.example", credentialSource: "anonymous" };
    },
    async listReferrers() {
      if (referrers === "timeout") throw new RegistryError("timeout", "the caller's deadline passed");
      return { descriptors: [], source: "none" as const, endpoint: "r.example", credentialSource: "anonymous" };
    },
  };
  const checkAttestors = attestorsWith(`{staticKey: {ignoreTlog: true, key: ${JSON.stringify(signer.publicKeyPem)}}}`);
  const req: VerificationRequest = { ...request(), attestors: [], attestations: [{ index: 0, predicateType: SLSA, attestors: checkAttestors }] };
  // The statements not read could fail a condition or a check over all statements: an outage, not a verification.
  const partial = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(req, soon());
  assert.equal(partial.status, "unavailable", partial.status === "denied" ? partial.reason : "");
  assert.match(partial.status === "unavailable" ? partial.reason : "", /did not answer every attestation lookup/);
  referrers = "none";
  const complete = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(req, soon());
  assert.equal(complete.status, "verified", complete.status === "verified" ? "" : complete.reason);
});

test("peekAll answers from the cache without an await only when every request is cached, and counts hits only then", async () => {
  const s = store({ signed: true });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  assert.equal(v.peekAll([request()]), undefined, "nothing verified yet");
  const verified = await v.verify(request(), soon());
  const found = v.peekAll([request(), request()]);
  assert.ok(found);
  assert.equal(found.length, 2);
  assert.ok(
    found.every((r) => r === verified),
    "the cached result object itself",
  );
  assert.equal(v.hits, 2);
  // One request not cached (another rule, another pod's credentials): none is answered, and no hit is counted.
  assert.equal(v.peekAll([request(), request(anonymous, 1)]), undefined);
  assert.equal(v.peekAll([request(), request(withSecret)]), undefined);
  assert.equal(v.hits, 2);
  assert.equal(v.verifications, 1, "peekAll never verifies");
  // A policy reload: the cached result is gone for peekAll too.
  v.clear();
  assert.equal(v.peekAll([request()]), undefined);
  assert.deepEqual(v.peekAll([]), [], "nothing asked: nothing to wait for");
});

test("peekAll does not answer a denial past its TTL, nor an outage", async () => {
  let now = 1_000;
  const v = new ImageVerifier({ client: store({ signed: false }).client, trustRoots: () => new Map(), deniedTtlMs: 1_000, now: () => now });
  const denied = await v.verify(request(), soon());
  assert.equal(denied.status, "denied");
  assert.equal(v.peekAll([request()])?.[0], denied);
  now = 2_001;
  assert.equal(v.peekAll([request()]), undefined);
  const down = new ImageVerifier({ client: store({ fail: "unreachable" }).client, trustRoots: () => new Map() });
  assert.equal((await down.verify(request(), soon())).status, "unavailable");
  assert.equal(down.peekAll([request()]), undefined);
});
