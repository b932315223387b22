// Finding signatures in a registry, with a scripted registry client (the layouts themselves are read from
// docker-registry in test/e2e/signature-verification.test.ts): bounded counts and sizes, malformed artifacts
// reported and skipped, bundles of unknown types ignored, "no answer" kept apart from the registry's answers.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { DownloadBudget } from "../../../src/registry/download-budget.ts";
import { RegistryError } from "../../../src/registry/registry-error.ts";
import { discoverSignatures, MAX_ATTESTATION_BLOB_BYTES, MAX_SIGNATURES, MAX_SIGNATURE_BLOB_BYTES } from "../../../src/verification/signature-discovery.ts";

const DIGEST = `sha256:${createHash("sha256").update("m").digest("hex")}`;
const at = { registry: "r.example", repository: "app", digest: DIGEST };
const sha = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;
const layer = (i: number, annotations: Record<string, string> = { "dev.cosignproject.cosign/signature": "AAAA" }) => ({
  mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
  digest: sha(`payload ${i}`),
  size: 10,
  annotations,
});

function client(script: {
  sig?: Buffer | RegistryError;
  att?: Buffer | RegistryError;
  blob?: (digest: string, maxBytes: number | undefined) => Buffer | RegistryError;
  referrers?: Array<{ mediaType: string; digest: string; size: number; artifactType?: string; annotations?: Record<string, string> }> | RegistryError;
}) {
  const blobCalls: number[] = [];
  return {
    blobCalls,
    client: {
      async getManifest(ref: { tag?: string; digest?: string }) {
        const byTag = ref.tag?.endsWith(".sig") ? script.sig : ref.tag?.endsWith(".att") ? script.att : undefined;
        const answer = byTag ?? new RegistryError("not-found", "manifest unknown");
        if (answer instanceof RegistryError) throw answer;
        return {
          digest: sha("x"),
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          size: answer.length,
          body: answer,
          endpoint: "r.example",
          credentialSource: "anonymous",
        };
      },
      async getBlob(_repo: unknown, digest: string, options?: { maxBytes?: number }) {
        blobCalls.push(options?.maxBytes ?? -1);
        const answer = script.blob?.(digest, options?.maxBytes) ?? Buffer.from("{}");
        if (answer instanceof RegistryError) throw answer;
        return { digest, body: answer, endpoint: "r.example", credentialSource: "anonymous" };
      },
      async listReferrers() {
        if (script.referrers instanceof RegistryError) throw script.referrers;
        return { descriptors: script.referrers ?? [], source: "api" as const, endpoint: "r.example", credentialSource: "anonymous" };
      },
    },
  };
}

test("each simple-signing layer is one signature; blobs are read with the size limit; at most 32 are read", async () => {
  const many = Buffer.from(JSON.stringify({ layers: Array.from({ length: 40 }, (_, i) => layer(i)) }));
  const c = client({ sig: many });
  const found = await discoverSignatures(c.client, at, at, {});
  assert.equal(found.items.length, MAX_SIGNATURES);
  assert.ok(c.blobCalls.every((max) => max === MAX_SIGNATURE_BLOB_BYTES));
  assert.deepEqual(found.problems, [`r.example/app:${DIGEST.replace(":", "-")}.sig: 40 signatures; only the first 32 are read`]);
});

test("a corrupt .sig manifest, an oversized blob and a layer without a signature are reported, the rest still read", async () => {
  const corrupt = await discoverSignatures(client({ sig: Buffer.from("not json") }).client, at, at, {});
  assert.deepEqual(corrupt.items, []);
  assert.match(corrupt.problems[0]!, /not an image manifest with layers/);

  const mixed = Buffer.from(JSON.stringify({ layers: [layer(0), layer(1, {}), layer(2)] }));
  const tooLarge = new RegistryError("too-large", "blob is larger than 262144 bytes");
  const found = await discoverSignatures(client({ sig: mixed, blob: (d) => (d === sha("payload 2") ? tooLarge : Buffer.from("{}")) }).client, at, at, {});
  assert.equal(found.items.length, 1);
  assert.equal(found.problems.length, 2);
  assert.match(found.problems.join("\n"), /layer 1: no dev\.cosignproject\.cosign\/signature annotation/);
  assert.match(found.problems.join("\n"), /layer 2: blob is larger than/);
  assert.deepEqual(found.unanswered, []);
});

test("referrers of unknown artifact types and attestation bundles are not fetched; a malformed bundle is reported", async () => {
  const referrers = [
    { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: sha("sbom"), size: 1, artifactType: "application/spdx+json" },
    {
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      digest: sha("provenance"),
      size: 1,
      artifactType: "application/vnd.dev.sigstore.bundle.v0.3+json",
      annotations: { "dev.sigstore.bundle.predicateType": "https://slsa.dev/provenance/v1" },
    },
    { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: sha("bundle"), size: 1, artifactType: "application/vnd.dev.sigstore.bundle.v0.3+json" },
  ];
  const c = client({ referrers });
  c.client.getManifest = async () => ({
    digest: sha("bundle"),
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    size: 1,
    body: Buffer.from(JSON.stringify({ layers: [{ mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json", digest: sha("b"), size: 2 }] })),
    endpoint: "r.example",
    credentialSource: "anonymous",
  });
  const found = await discoverSignatures(c.client, at, at, {});
  assert.equal(c.blobCalls.length, 1, "only the bundle's blob is fetched");
  assert.deepEqual(found.items, []);
  assert.match(found.problems[0]!, /referrer r\.example\/app@sha256:[0-9a-f]{64}: not a valid Sigstore bundle/);
});

test("a registry that does not answer is kept apart from one that answers no", async () => {
  const down = await discoverSignatures(
    client({ sig: new RegistryError("unreachable", "connection refused"), referrers: new RegistryError("timeout", "deadline") }).client,
    at,
    at,
    {},
  );
  assert.deepEqual(
    down.unanswered.map((e) => e.code),
    ["unreachable", "timeout"],
  );
  const refused = await discoverSignatures(client({ sig: new RegistryError("unauthorized", "refused") }).client, at, at, {});
  assert.deepEqual(refused.unanswered, []);
  assert.match(refused.problems[0]!, /refused/);
});

test("asked for attestations: cosign's .att tag is read (DSSE layers, a larger size limit); not asked, it is not", async () => {
  const envelope = Buffer.from(
    JSON.stringify({ payloadType: "application/vnd.in-toto+json", payload: Buffer.from("{}").toString("base64"), signatures: [{ keyid: "", sig: "AAAA" }] }),
  );
  const att = Buffer.from(JSON.stringify({ layers: [{ mediaType: "application/vnd.dsse.envelope.v1+json", digest: sha("att"), size: 1, annotations: {} }] }));
  const c = client({ att, blob: () => envelope });
  const without = await discoverSignatures(c.client, at, at, {});
  assert.deepEqual(without.attestations, []);
  assert.equal(c.blobCalls.length, 0);
  const found = await discoverSignatures(c.client, at, at, {}, { predicateTypes: ["https://example.com/any"] });
  assert.equal(found.attestations.length, 1, found.problems.join("\n"));
  assert.equal(found.attestations[0]!.format, "cosign-attestation");
  assert.deepEqual(c.blobCalls, [MAX_ATTESTATION_BLOB_BYTES]);
  assert.ok(found.looked.some((l) => l.endsWith(".att")));
});

const BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json";
const VULN = "https://cosign.sigstore.dev/attestation/vuln/v1";
const PROVENANCE = "https://slsa.dev/provenance/v1";
const referrer = (name: string, predicateType?: string, size = 500) => ({
  mediaType: "application/vnd.oci.image.manifest.v1+json",
  digest: sha(name),
  size,
  artifactType: BUNDLE_TYPE,
  ...(predicateType ? { annotations: { "dev.sigstore.bundle.predicateType": predicateType } } : {}),
});

/** A scripted client whose referrer manifests each hold one bundle layer; records which referrers were fetched. */
function referrersClient(descriptors: ReturnType<typeof referrer>[], layerSize = 100) {
  const fetched: string[] = [];
  const blobs: string[] = [];
  const base = client({ referrers: descriptors });
  base.client.getManifest = async (ref: { tag?: string; digest?: string }) => {
    if (ref.tag !== undefined) throw new RegistryError("not-found", "manifest unknown");
    fetched.push(ref.digest!);
    const body = Buffer.from(JSON.stringify({ layers: [{ mediaType: BUNDLE_TYPE, digest: sha(`layer of ${ref.digest}`), size: layerSize }] }));
    return {
      digest: ref.digest!,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      size: body.length,
      body,
      endpoint: "r.example",
      credentialSource: "anonymous",
    };
  };
  const getBlob = base.client.getBlob;
  base.client.getBlob = async (repo: unknown, digest: string, options?: { maxBytes?: number }) => {
    blobs.push(digest);
    return getBlob(repo, digest, options);
  };
  return { client: base.client, fetched, blobs };
}

test("with attestations asked for, 40 attestation bundles do not push the image's signature bundle out", async () => {
  const descriptors = [...Array.from({ length: 40 }, (_, i) => referrer(`vuln ${i}`, VULN)), referrer("signature")];
  const c = referrersClient(descriptors);
  await discoverSignatures(c.client, at, at, {}, { predicateTypes: [VULN] });
  assert.ok(c.fetched.includes(sha("signature")), "the signature bundle is fetched");
  assert.equal(c.fetched.filter((d) => d !== sha("signature")).length, MAX_SIGNATURES, "attestations are capped on their own");
});

test("attestation bundles of predicate types no rule asks for are not fetched", async () => {
  const descriptors = [...Array.from({ length: 5 }, (_, i) => referrer(`provenance ${i}`, PROVENANCE)), referrer("vuln", VULN)];
  const c = referrersClient(descriptors);
  await discoverSignatures(c.client, at, at, {}, { predicateTypes: [VULN] });
  assert.deepEqual(c.fetched, [sha("vuln")]);
});

test("a signature layer or bundle layer that declares more than its limit is never requested", async () => {
  const huge = 300 * 1024 * 1024;
  const sig = Buffer.from(JSON.stringify({ layers: [{ ...layer(0), size: huge }] }));
  const c = client({ sig });
  const found = await discoverSignatures(c.client, at, at, {});
  assert.deepEqual(c.blobCalls, []);
  assert.match(found.problems.join("\n"), /declares 314572800 bytes/);

  const r = referrersClient([referrer("signature")], huge);
  const viaReferrer = await discoverSignatures(r.client, at, at, {});
  assert.deepEqual(r.blobs, []);
  assert.match(viaReferrer.problems.join("\n"), /declares 314572800 bytes/);
});

test("the download budget: an artifact declared larger than what is left is not fetched, and the hit is kept with its code", async () => {
  const r = referrersClient([referrer("small", undefined, 200), referrer("large", undefined, 50_000)]);
  const found = await discoverSignatures(r.client, at, at, { budget: new DownloadBudget(10_000) });
  assert.deepEqual(r.fetched, [sha("small")]);
  assert.equal(found.limitHit?.code, "download-limit");
  assert.deepEqual(found.unanswered, [], "a limit hit is not an outage: the failure policy does not apply");
});

test("cosign .att layers are picked by their predicateType annotation before download", async () => {
  const attLayer = (name: string, predicateType: string) => ({
    mediaType: "application/vnd.dsse.envelope.v1+json",
    digest: sha(name),
    size: 10,
    annotations: { predicateType },
  });
  const att = Buffer.from(JSON.stringify({ layers: [...Array.from({ length: 40 }, (_, i) => attLayer(`p${i}`, PROVENANCE)), attLayer("v", VULN)] }));
  const fetched: string[] = [];
  const c = client({
    att,
    blob: (d) => {
      fetched.push(d);
      return Buffer.from("{}");
    },
  });
  await discoverSignatures(c.client, at, at, {}, { predicateTypes: [VULN] });
  assert.deepEqual(fetched, [sha("v")]);
});
