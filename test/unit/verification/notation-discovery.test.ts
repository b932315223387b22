// Finding Notary Project signatures among an image's referrers (src/verification/signature-discovery.ts), with a
// scripted registry client: read only when asked for, one envelope layer each, capped in count and size, a
// malformed artifact reported and skipped. (The layouts on docker-registry: test/e2e, with the wiring.)
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { RegistryError } from "../../../src/registry/registry-error.ts";
import { discoverSignatures, MAX_NOTATION_ENVELOPE_BYTES } from "../../../src/verification/signature-discovery.ts";

const sha = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;
const DIGEST = sha("image");
const at = { registry: "r.example", repository: "app", digest: DIGEST };
const NOTARY = "application/vnd.cncf.notary.signature";

function signatureManifest(i: number, layers = [{ mediaType: "application/jose+json", digest: sha(`envelope ${i}`), size: 100 }]) {
  return Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: NOTARY, digest: sha("{}"), size: 2 },
      layers,
    }),
  );
}

function client(manifests: Map<string, Buffer | RegistryError>, referrers: Array<{ digest: string; artifactType?: string; size?: number }>) {
  const fetched: string[] = [];
  return {
    fetched,
    client: {
      async getManifest(ref: { tag?: string; digest?: string }) {
        const answer = (ref.digest ? manifests.get(ref.digest) : undefined) ?? new RegistryError("not-found", "manifest unknown");
        if (answer instanceof RegistryError) throw answer;
        fetched.push(ref.digest!);
        return {
          digest: ref.digest!,
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          size: answer.length,
          body: answer,
          endpoint: "r.example",
          credentialSource: "anonymous",
        };
      },
      async getBlob(_repo: unknown, digest: string, options?: { maxBytes?: number }) {
        fetched.push(`blob ${digest} max ${options?.maxBytes}`);
        return { digest, body: Buffer.from(`envelope of ${digest}`), endpoint: "r.example", credentialSource: "anonymous" };
      },
      async listReferrers() {
        return {
          descriptors: referrers.map((r) => ({ mediaType: "application/vnd.oci.image.manifest.v1+json", size: r.size ?? 500, ...r })),
          source: "api" as const,
          endpoint: "r.example",
          credentialSource: "anonymous",
        };
      },
    },
  };
}

test("Notary Project signatures are read when asked for: each referrer's one envelope, within its size limit", async () => {
  const manifests = new Map<string, Buffer | RegistryError>([
    [sha("sig 1"), signatureManifest(1)],
    [sha("sig 2"), signatureManifest(2, [{ mediaType: "application/cose", digest: sha("envelope 2"), size: 90 }])],
  ]);
  const c = client(manifests, [
    { digest: sha("sig 1"), artifactType: NOTARY },
    { digest: sha("sig 2"), artifactType: NOTARY },
    { digest: sha("sbom"), artifactType: "application/spdx+json" },
  ]);
  const found = await discoverSignatures(c.client, at, at, {}, { notation: true });
  assert.deepEqual(found.notation.map((n) => n.mediaType).sort(), ["application/cose", "application/jose+json"]);
  assert.ok(found.notation.every((n) => n.location.startsWith("referrer r.example/app@sha256:")));
  assert.equal(Buffer.from(found.notation.find((n) => n.mediaType === "application/cose")!.envelope).toString(), `envelope of ${sha("envelope 2")}`);
  assert.ok(c.fetched.includes(`blob ${sha("envelope 1")} max ${MAX_NOTATION_ENVELOPE_BYTES}`));
  assert.ok(!c.fetched.includes(sha("sbom")), "another artifact type is not fetched");
  assert.ok(found.looked.some((l) => /Notary Project signatures referring to/.test(l)));
});

test("not asked for: no Notary Project signature is fetched", async () => {
  const c = client(new Map([[sha("sig 1"), signatureManifest(1)]]), [{ digest: sha("sig 1"), artifactType: NOTARY }]);
  const found = await discoverSignatures(c.client, at, at, {}, {});
  assert.deepEqual(found.notation, []);
  assert.deepEqual(c.fetched, []);
});

test("a signature manifest with another layer, or two, is reported and skipped; an oversized envelope is not requested", async () => {
  const manifests = new Map<string, Buffer | RegistryError>([
    [
      sha("two"),
      signatureManifest(1, [
        { mediaType: "application/jose+json", digest: sha("a"), size: 1 },
        { mediaType: "application/jose+json", digest: sha("b"), size: 1 },
      ]),
    ],
    [sha("pgp"), signatureManifest(2, [{ mediaType: "application/pgp-signature", digest: sha("c"), size: 1 }])],
    [sha("huge"), signatureManifest(3, [{ mediaType: "application/cose", digest: sha("d"), size: MAX_NOTATION_ENVELOPE_BYTES + 1 }])],
  ]);
  const c = client(manifests, [
    { digest: sha("two"), artifactType: NOTARY },
    { digest: sha("pgp"), artifactType: NOTARY },
    { digest: sha("huge"), artifactType: NOTARY },
  ]);
  const found = await discoverSignatures(c.client, at, at, {}, { notation: true });
  assert.deepEqual(found.notation, []);
  assert.equal(found.problems.filter((p) => /not a Notary Project signature/.test(p)).length, 2);
  assert.ok(found.problems.some((p) => /declares \d+ bytes; the limit is/.test(p)));
  assert.ok(!c.fetched.some((f) => f.startsWith(`blob ${sha("d")}`)));
});

test("at most maxArtifacts Notary Project signatures are read, and the rest are reported", async () => {
  const manifests = new Map<string, Buffer | RegistryError>(Array.from({ length: 5 }, (_, i) => [sha(`sig ${i}`), signatureManifest(i)] as const));
  const c = client(
    manifests,
    Array.from({ length: 5 }, (_, i) => ({ digest: sha(`sig ${i}`), artifactType: NOTARY })),
  );
  const found = await discoverSignatures(c.client, at, at, {}, { notation: true, maxArtifacts: 3 });
  assert.equal(found.notation.length, 3);
  assert.ok(found.problems.some((p) => /5 Notary Project signatures refer to .*only the first 3 are read/.test(p)));
});
