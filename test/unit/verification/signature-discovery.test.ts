// Finding signatures in a registry, with a scripted registry client (the layouts themselves are read from
// docker-registry in test/e2e/signature-verification.test.ts): bounded counts and sizes, malformed artifacts
// reported and skipped, bundles of unknown types ignored, "no answer" kept apart from the registry's answers.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
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
  const found = await discoverSignatures(c.client, at, at, {}, { attestations: true });
  assert.equal(found.attestations.length, 1, found.problems.join("\n"));
  assert.equal(found.attestations[0]!.format, "cosign-attestation");
  assert.deepEqual(c.blobCalls, [MAX_ATTESTATION_BLOB_BYTES]);
  assert.ok(found.looked.some((l) => l.endsWith(".att")));
});
