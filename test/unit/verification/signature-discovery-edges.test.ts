// Finding signatures, at the edges, with a scripted registry client (the layouts themselves are read from
// docker-registry in test/e2e): caps that are exactly met, referrer bundles that sign the image manifest,
// which referrers are signatures and which attestations, malformed layer descriptors, and what counts as an outage.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { DownloadBudget } from "../../../src/registry/download-budget.ts";
import { RegistryError } from "../../../src/registry/registry-error.ts";
import { discoverSignatures, MAX_ATTESTATION_BLOB_BYTES, MAX_SIGNATURE_BLOB_BYTES } from "../../../src/verification/signature-discovery.ts";
import { COSIGN_SIGN_PREDICATE } from "../../../src/verification/signed-item.ts";

const sha = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;
const DIGEST = sha("image");
const at = { registry: "r.example", repository: "app", digest: DIGEST };
const SIG_TAG = `r.example/app:${DIGEST.replace(":", "-")}.sig`;
const ATT_TAG = `r.example/app:${DIGEST.replace(":", "-")}.att`;
const SLSA = "https://slsa.dev/provenance/v1";
const BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json";
const IMAGE_MANIFEST = Buffer.from('{"schemaVersion":2,"the":"image"}');

const sigLayer = (i: number, over: Record<string, unknown> = {}) => ({
  mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
  digest: sha(`payload ${i}`),
  size: 10,
  annotations: { "dev.cosignproject.cosign/signature": "AAAA" },
  ...over,
});
const attLayer = (i: number) => ({
  mediaType: "application/vnd.dsse.envelope.v1+json",
  digest: sha(`att ${i}`),
  size: 10,
  annotations: { predicateType: SLSA },
});
const manifestOf = (layers: unknown[]) => Buffer.from(JSON.stringify({ layers }));

const material = { publicKey: { hint: "k" }, tlogEntries: [], timestampVerificationData: { rfc3161Timestamps: [] } };
const messageBundle = (pretty = false) =>
  Buffer.from(
    JSON.stringify(
      {
        mediaType: BUNDLE,
        verificationMaterial: material,
        messageSignature: { messageDigest: { algorithm: "SHA2_256", digest: createHash("sha256").update(IMAGE_MANIFEST).digest("base64") }, signature: "AAAA" },
      },
      null,
      pretty ? 1 : undefined,
    ),
  );
const dsseBundle = Buffer.from(
  JSON.stringify({
    mediaType: BUNDLE,
    verificationMaterial: material,
    dsseEnvelope: { payloadType: "application/vnd.in-toto+json", payload: "e30=", signatures: [{ keyid: "", sig: "AAAA" }] },
  }),
);

/** A referrer descriptor of a bundle, its artifact manifest (one bundle layer) and the bundle blob. */
interface Referrer {
  digest: string;
  size?: number;
  artifactType?: string;
  annotations?: Record<string, string>;
  /** The artifact manifest's body; default: one bundle layer of `blob`. */
  artifact?: Buffer;
  blob?: Buffer;
  layerSize?: number;
}

function scripted(script: {
  sig?: Buffer;
  att?: Buffer;
  referrers?: Referrer[] | RegistryError;
  blob?: (digest: string) => Buffer | RegistryError;
  image?: Buffer | RegistryError;
}) {
  const calls = { imageManifest: 0, artifacts: [] as string[], blobs: [] as Array<{ digest: string; maxBytes: number | undefined }> };
  const blobs = new Map<string, Buffer>();
  const artifacts = new Map<string, Buffer>();
  for (const r of script.referrers instanceof RegistryError ? [] : (script.referrers ?? [])) {
    const blob = r.blob ?? messageBundle();
    blobs.set(sha(`blob of ${r.digest}`), blob);
    artifacts.set(r.digest, r.artifact ?? manifestOf([{ mediaType: BUNDLE, digest: sha(`blob of ${r.digest}`), size: r.layerSize ?? blob.length }]));
  }
  const reply = (body: Buffer) => ({
    digest: sha("x"),
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    size: body.length,
    body,
    endpoint: "r.example",
    credentialSource: "anonymous",
  });
  return {
    calls,
    client: {
      async getManifest(ref: { tag?: string; digest?: string }) {
        if (ref.tag?.endsWith(".sig") && script.sig) return reply(script.sig);
        if (ref.tag?.endsWith(".att") && script.att) return reply(script.att);
        if (ref.digest === DIGEST) {
          calls.imageManifest++;
          if (script.image instanceof RegistryError) throw script.image;
          return reply(script.image ?? IMAGE_MANIFEST);
        }
        if (ref.digest && artifacts.has(ref.digest)) {
          calls.artifacts.push(ref.digest);
          return reply(artifacts.get(ref.digest)!);
        }
        throw new RegistryError("not-found", "manifest unknown");
      },
      async getBlob(_repo: unknown, digest: string, options?: { maxBytes?: number }) {
        calls.blobs.push({ digest, maxBytes: options?.maxBytes });
        const answer = script.blob?.(digest) ?? blobs.get(digest) ?? Buffer.from("{}");
        if (answer instanceof RegistryError) throw answer;
        return { digest, body: answer, endpoint: "r.example", credentialSource: "anonymous" };
      },
      async listReferrers() {
        if (script.referrers instanceof RegistryError) throw script.referrers;
        return {
          descriptors: (script.referrers ?? []).map((r) => ({
            mediaType: "application/vnd.oci.image.manifest.v1+json",
            digest: r.digest,
            size: r.size ?? 100,
            ...("artifactType" in r ? { artifactType: r.artifactType } : { artifactType: BUNDLE }),
            ...(r.annotations ? { annotations: r.annotations } : {}),
          })),
          source: "api" as const,
          endpoint: "r.example",
          credentialSource: "anonymous",
        };
      },
    },
  };
}

test("exactly the cap of signatures, or of referrer bundles, is read without a note; one more is noted per kind", async () => {
  const exact = await discoverSignatures(
    scripted({ sig: manifestOf([sigLayer(0), sigLayer(1)]), referrers: [{ digest: sha("r0") }, { digest: sha("r1") }] }).client,
    at,
    at,
    {},
    { maxArtifacts: 2 },
  );
  assert.deepEqual(exact.problems, []);
  assert.equal(exact.items.length, 4);

  const over = scripted({
    att: manifestOf([attLayer(0), attLayer(1), attLayer(2)]),
    referrers: [{ digest: sha("r0") }, { digest: sha("r1") }, { digest: sha("r2") }],
  });
  const found = await discoverSignatures(over.client, at, at, {}, { maxArtifacts: 2, predicateTypes: [SLSA] });
  assert.deepEqual(
    found.problems.filter((p) => p.includes("only the first")).sort(),
    [`${ATT_TAG}: 3 attestations; only the first 2 are read`, `r.example/app: 3 signature bundles refer to ${DIGEST}; only the first 2 are read`].sort(),
  );
  assert.equal(over.calls.artifacts.length, 2, "only the first two referrers are fetched");
  assert.equal(over.calls.blobs.filter((b) => b.maxBytes === MAX_ATTESTATION_BLOB_BYTES).length, 2, "only the first two .att layers are fetched");
});

test("a .sig layer is a signature whatever predicateType annotation it carries", async () => {
  const sig = manifestOf([sigLayer(0, { annotations: { "dev.cosignproject.cosign/signature": "AAAA", predicateType: "https://example.com/other" } })]);
  const found = await discoverSignatures(scripted({ sig }).client, at, at, {}, { predicateTypes: [SLSA] });
  assert.equal(found.items.length, 1);
  assert.deepEqual(found.problems, []);
});

test("message-signature bundles get the image manifest as what they sign, fetched once; it is left out when unreadable", async () => {
  const s = scripted({ referrers: [{ digest: sha("r0") }, { digest: sha("r1"), blob: messageBundle(true) }] });
  const found = await discoverSignatures(s.client, at, at, {});
  assert.equal(found.items.length, 2);
  assert.ok(found.items.every((item) => item.format === "sigstore-bundle" && item.artifact?.equals(IMAGE_MANIFEST)));
  assert.equal(s.calls.imageManifest, 1);

  const gone = scripted({ referrers: [{ digest: sha("r0") }], image: new RegistryError("not-found", "manifest unknown") });
  const without = await discoverSignatures(gone.client, at, at, {});
  assert.equal(without.items.length, 1);
  assert.equal(without.items[0]!.artifact, undefined);

  const dsseOnly = scripted({ referrers: [{ digest: sha("r0"), blob: dsseBundle }] });
  await discoverSignatures(dsseOnly.client, at, at, {});
  assert.equal(dsseOnly.calls.imageManifest, 0, "a DSSE bundle signs its own payload: the image manifest is not fetched");
});

test("referrers without a predicate type, or with cosign's image-signature one, are signatures; others are attestations, each with its size limit", async () => {
  const s = scripted({
    referrers: [
      { digest: sha("plain") },
      { digest: sha("cosign sign"), annotations: { "dev.sigstore.bundle.predicateType": COSIGN_SIGN_PREDICATE } },
      { digest: sha("provenance"), annotations: { "dev.sigstore.bundle.predicateType": SLSA }, blob: dsseBundle },
    ],
  });
  const found = await discoverSignatures(s.client, at, at, {}, { predicateTypes: [SLSA] });
  assert.deepEqual(
    found.items.map((i) => i.location).sort(),
    [`referrer r.example/app@${sha("cosign sign")}`, `referrer r.example/app@${sha("plain")}`].sort(),
  );
  assert.deepEqual(
    found.attestations.map((i) => i.location),
    [`referrer r.example/app@${sha("provenance")}`],
  );
  const limits = new Map(s.calls.blobs.map((b) => [b.digest, b.maxBytes]));
  assert.equal(limits.get(sha(`blob of ${sha("plain")}`)), MAX_SIGNATURE_BLOB_BYTES);
  assert.equal(limits.get(sha(`blob of ${sha("provenance")}`)), MAX_ATTESTATION_BLOB_BYTES);
});

test("referrers that are not Sigstore bundles are never fetched", async () => {
  const s = scripted({
    referrers: [
      { digest: sha("untyped"), artifactType: undefined },
      { digest: sha("sbom"), artifactType: "application/spdx+json" },
    ],
  });
  const found = await discoverSignatures(s.client, at, at, {});
  assert.deepEqual(s.calls.artifacts, []);
  assert.deepEqual(found.problems, []);
  assert.deepEqual(found.items, []);
});

test("a referrer whose artifact is not a manifest, or has no bundle layer, is reported as such", async () => {
  const s = scripted({
    referrers: [
      { digest: sha("not json"), artifact: Buffer.from("not json") },
      { digest: sha("no bundle"), artifact: manifestOf([{ mediaType: "application/octet-stream", digest: sha("z"), size: 1 }]) },
    ],
  });
  const found = await discoverSignatures(s.client, at, at, {});
  assert.deepEqual(found.problems.sort(), [
    `referrer r.example/app@${sha("no bundle")}: no Sigstore bundle layer`,
    `referrer r.example/app@${sha("not json")}: no Sigstore bundle layer`,
  ]);
});

test("a bundle layer's declared size is checked against its limit (exactly the limit is fine) and the budget", async () => {
  const tooLarge = scripted({ referrers: [{ digest: sha("big"), layerSize: MAX_SIGNATURE_BLOB_BYTES + 1 }] });
  const refused = await discoverSignatures(tooLarge.client, at, at, {});
  const big = `referrer r.example/app@${sha("big")}`;
  // The artifact is named once, though both the reader and the discovery know where it is.
  assert.deepEqual(refused.problems, [`${big} layer declares ${MAX_SIGNATURE_BLOB_BYTES + 1} bytes; the limit is ${MAX_SIGNATURE_BLOB_BYTES} bytes`]);
  assert.deepEqual(tooLarge.calls.blobs, []);

  const atLimit = scripted({ referrers: [{ digest: sha("edge"), layerSize: MAX_SIGNATURE_BLOB_BYTES }] });
  assert.equal((await discoverSignatures(atLimit.client, at, at, {})).items.length, 1);

  // A layer that declares no size is read (the read itself is bounded), even against a budget.
  const undeclared = scripted({ sig: manifestOf([sigLayer(0, { size: undefined })]) });
  const read = await discoverSignatures(undeclared.client, at, at, { budget: new DownloadBudget(1_000) });
  assert.equal(read.items.length, 1);
  assert.equal(read.limitHit, undefined);

  const budget = scripted({ sig: manifestOf([sigLayer(0, { size: 5_000 })]) });
  const spent = await discoverSignatures(budget.client, at, at, { budget: new DownloadBudget(1_000) });
  assert.equal(spent.limitHit?.code, "download-limit");
  assert.match(
    spent.problems[0]!,
    new RegExp(`^${SIG_TAG.replace(/[.]/g, "\\.")} layer 0: r\\.example/app: ${SIG_TAG.replace(/[.]/g, "\\.")} layer 0 \\(declares 5000 bytes\\)`),
  );
});

test("malformed layer descriptors are skipped; non-string annotations dropped; a size that is not a byte count is not trusted", async () => {
  const sig = manifestOf([
    sigLayer(0, { digest: "sha256:NOTHEX" }),
    sigLayer(1, { digest: `x${sha("a")}` }),
    sigLayer(2, { digest: `${sha("b")}/..` }),
    sigLayer(3, { mediaType: undefined }),
    sigLayer(4, { digest: 7 }),
    null,
    sigLayer(5, { annotations: { "dev.cosignproject.cosign/signature": 5 } }),
    sigLayer(6, { size: "999999999999" }),
    sigLayer(7, { size: -1 }),
    sigLayer(8, { annotations: "not an object" }),
  ]);
  const s = scripted({ sig });
  const found = await discoverSignatures(s.client, at, at, {});
  assert.deepEqual(s.calls.blobs.map((b) => b.digest).sort(), [sha("payload 5"), sha("payload 6"), sha("payload 7"), sha("payload 8")].sort());
  assert.equal(found.items.length, 2);
  // Each layer is named once, though both the reader and the discovery know where it is.
  assert.deepEqual(found.problems.sort(), [
    `${SIG_TAG} layer 0: no dev.cosignproject.cosign/signature annotation`,
    `${SIG_TAG} layer 3: no dev.cosignproject.cosign/signature annotation`,
  ]);

  const notLayers = await discoverSignatures(scripted({ sig: Buffer.from('{"layers":{}}') }).client, at, at, {});
  assert.deepEqual(notLayers.problems, [`${SIG_TAG}: not an image manifest with layers`]);
});

test("a blob or referrer list that does not answer is an outage; a refusal is a problem with its location", async () => {
  const down = await discoverSignatures(
    scripted({ sig: manifestOf([sigLayer(0)]), blob: () => new RegistryError("unreachable", "connection refused"), referrers: [] }).client,
    at,
    at,
    {},
  );
  assert.deepEqual(
    down.unanswered.map((e) => e.message),
    ["connection refused"],
  );
  assert.deepEqual(down.problems, []);

  const refused = await discoverSignatures(scripted({ referrers: new RegistryError("unauthorized", "no access") }).client, at, at, {});
  assert.deepEqual(refused.problems, [`referrers of ${DIGEST} in r.example/app: no access`]);
});
