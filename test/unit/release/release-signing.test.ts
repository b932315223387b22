// The release signer's parts without a registry: the key it takes (an unencrypted ECDSA P-256 PEM) and refuses,
// the bundles it makes (verified by @sigstore/verify, the reference verifier, and by Imprimatur's own verifier
// with ignoreTlog), the referrer manifests (cosign v3's layout), and what it pushes where, against a stand-in
// registry client with and without the Referrers API. test/e2e/release-signing.test.ts does it against a real
// registry and a running server.
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { describe, test } from "node:test";
import { OCI_IMAGE_INDEX, OCI_IMAGE_MANIFEST } from "../../../src/registry/media-types.ts";
import type { ReferrerDescriptor } from "../../../src/registry/referrers.ts";
import type { Manifest, Referrers } from "../../../src/registry/registry-client.ts";
import { COSIGN_SIGN_PREDICATE, imageSignatureStatement, inTotoStatement } from "../../../src/release/in-toto.ts";
import { SLSA_PROVENANCE_PREDICATE_TYPE } from "../../../src/release/provenance.ts";
import { OCI_EMPTY, referrerManifest } from "../../../src/release/referrer-manifests.ts";
import { ReleaseError } from "../../../src/release/release-error.ts";
import { SPDX_PREDICATE_TYPE } from "../../../src/release/sbom.ts";
import { signImage, type ReleaseClient } from "../../../src/release/sign-image.ts";
import { BUNDLE_MEDIA_TYPE, keySignedStatementBundle } from "../../../src/release/sigstore-bundle.ts";
import { parseSigningKey, releaseKey } from "../../../src/release/signing-key.ts";
import { bundleToItem } from "../../../src/verification/signed-item.ts";
import { attestationBinding, imageBinding, publicKeyFromPem, verifyItem } from "../../../src/verification/verify-entry.ts";
import { generateSigningKey, trustedPublicKeys } from "../../support/signer/keys.ts";
import { EMPTY_TRUSTED_ROOT, verifyBundle } from "../../support/signer/reference-verify.ts";
import { leafAttestorsWith } from "../../support/verification-fixtures.ts";

const NAME = "registry.example.com/platform/imprimatur";
const MANIFEST = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_IMAGE_MANIFEST, config: {}, layers: [] }));
const DIGEST = `sha256:${createHash("sha256").update(MANIFEST).digest("hex")}`;

const p256 = () => generateKeyPairSync("ec", { namedCurve: "P-256" });
const pkcs8 = (key = p256().privateKey) => key.export({ format: "pem", type: "pkcs8" }).toString();

function refusal(pem: string, code: string, message: RegExp): void {
  assert.throws(
    () => parseSigningKey(pem, "release.key"),
    (e: unknown) => e instanceof ReleaseError && e.code === code && message.test(e.message),
  );
}

describe("the release key", () => {
  test("an unencrypted PKCS#8 or SEC 1 PEM of an ECDSA P-256 key is taken, with its public key, hint and fingerprint", () => {
    const { privateKey, publicKey } = p256();
    const der = publicKey.export({ format: "der", type: "spki" });
    for (const pem of [pkcs8(privateKey), privateKey.export({ format: "pem", type: "sec1" }).toString()]) {
      const key = parseSigningKey(pem, "release.key");
      assert.equal(key.publicKeyPem, publicKey.export({ format: "pem", type: "spki" }).toString());
      assert.equal(key.hint, createHash("sha256").update(der).digest("base64"));
      assert.equal(key.fingerprint, `sha256:${createHash("sha256").update(der).digest("hex")}`);
      assert.equal(key.hash, "sha256");
    }
  });

  test("cosign's encrypted format, a passphrase-protected PKCS#8, a public key and other key types are refused, saying what to give", () => {
    refusal(
      "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
      "key-format",
      /cosign's encrypted key format.*unencrypted PKCS#8/,
    );
    const encrypted = p256().privateKey.export({ format: "pem", type: "pkcs8", cipher: "aes-256-cbc", passphrase: "secret" }).toString();
    refusal(encrypted, "key-format", /encrypted with a passphrase/);
    refusal(p256().publicKey.export({ format: "pem", type: "spki" }).toString(), "key-format", /not the public one/);
    refusal("-----BEGIN PRIVATE KEY-----\nnot base64 DER\n-----END PRIVATE KEY-----\n", "key-format", /not a readable PEM private key/);
    refusal(pkcs8(generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey), "key-type", /ECDSA key on secp384r1.*P-256/);
    refusal(pkcs8(generateKeyPairSync("ed25519").privateKey), "key-type", /ed25519 key/);
    refusal(pkcs8(generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey), "key-type", /rsa key/);
  });
});

describe("the bundles and their referrer manifests", () => {
  const signing = generateSigningKey("ecdsa-p256");
  const key = releaseKey(signing.privateKey);
  const entry = leafAttestorsWith(`{staticKey: {ignoreTlog: true, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
  const strict = leafAttestorsWith(`{staticKey: {key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;

  test("a key-signed v0.3 DSSE bundle of the image signature statement: as cosign v3 writes it, valid for @sigstore/verify and for ignoreTlog", () => {
    const bundle = keySignedStatementBundle(key, imageSignatureStatement({ name: NAME, digest: DIGEST }));
    assert.equal(bundle.mediaType, "application/vnd.dev.sigstore.bundle.v0.3+json");
    const json = JSON.parse(bundle.bytes.toString());
    assert.equal(json.mediaType, BUNDLE_MEDIA_TYPE);
    assert.deepEqual(json.verificationMaterial.publicKey, { hint: key.hint });
    assert.deepEqual(json.verificationMaterial.tlogEntries, []);
    assert.deepEqual(json.verificationMaterial.timestampVerificationData, { rfc3161Timestamps: [] });
    assert.equal(json.dsseEnvelope.payloadType, "application/vnd.in-toto+json");
    assert.deepEqual(JSON.parse(Buffer.from(json.dsseEnvelope.payload, "base64").toString()), {
      _type: "https://in-toto.io/Statement/v1",
      subject: [{ name: NAME, digest: { sha256: DIGEST.slice(7) } }],
      predicateType: COSIGN_SIGN_PREDICATE,
      predicate: {},
    });
    verifyBundle(EMPTY_TRUSTED_ROOT, bundle.bytes, { keys: trustedPublicKeys([signing]), tlogThreshold: 0, timestampThreshold: 0 });
    assert.throws(() =>
      verifyBundle(EMPTY_TRUSTED_ROOT, bundle.bytes, {
        keys: trustedPublicKeys([{ key: generateSigningKey(), hint: key.hint }]),
        tlogThreshold: 0,
        timestampThreshold: 0,
      }),
    );

    const item = bundleToItem(bundle.bytes, "referrer", undefined);
    const cx = { trustRoot: undefined, key: publicKeyFromPem(key.publicKeyPem), binding: imageBinding(DIGEST) };
    assert.ok(verifyItem(item, entry, cx).ok);
    const other = `sha256:${"0".repeat(64)}`;
    assert.deepEqual(verifyItem(item, entry, { ...cx, binding: imageBinding(other) }), { ok: false, reason: `the statement's subject is not ${other}` });
    assert.equal(verifyItem(item, strict, cx).ok, false, "without ignoreTlog it is not accepted");
  });

  test("an attestation bundle verifies as that predicate type only", () => {
    const statement = inTotoStatement({ subjectName: NAME, digest: DIGEST, predicateType: SLSA_PROVENANCE_PREDICATE_TYPE, predicate: { buildDefinition: {} } });
    const item = bundleToItem(keySignedStatementBundle(key, statement).bytes, "referrer", undefined);
    const cx = { trustRoot: undefined, key: publicKeyFromPem(key.publicKeyPem) };
    assert.ok(verifyItem(item, entry, { ...cx, binding: attestationBinding(DIGEST, SLSA_PROVENANCE_PREDICATE_TYPE) }).ok);
    assert.equal(verifyItem(item, entry, { ...cx, binding: imageBinding(DIGEST) }).ok, false, "an attestation is no image signature");
  });

  test("the referrer manifest: empty config, the bundle as its one layer, subject the image, cosign's annotations", () => {
    const bundle = Buffer.from('{"bundle":true}');
    const subject = { mediaType: OCI_IMAGE_MANIFEST, digest: DIGEST, size: MANIFEST.length };
    const built = referrerManifest({
      bundleBytes: bundle,
      subject,
      predicateType: SPDX_PREDICATE_TYPE,
      content: "dsse-envelope",
      created: "2026-01-02T03:04:05Z",
    });
    const bundleDigest = `sha256:${createHash("sha256").update(bundle).digest("hex")}`;
    const annotations = {
      "dev.sigstore.bundle.content": "dsse-envelope",
      "dev.sigstore.bundle.predicateType": SPDX_PREDICATE_TYPE,
      "org.opencontainers.image.created": "2026-01-02T03:04:05Z",
    };
    assert.deepEqual(JSON.parse(built.manifest.toString()), {
      schemaVersion: 2,
      mediaType: OCI_IMAGE_MANIFEST,
      artifactType: BUNDLE_MEDIA_TYPE,
      config: { mediaType: "application/vnd.oci.empty.v1+json", digest: OCI_EMPTY.digest, size: 2 },
      layers: [{ mediaType: BUNDLE_MEDIA_TYPE, digest: bundleDigest, size: bundle.length }],
      subject,
      annotations,
    });
    assert.equal(OCI_EMPTY.digest, `sha256:${createHash("sha256").update("{}").digest("hex")}`);
    assert.deepEqual(built.descriptor, {
      mediaType: OCI_IMAGE_MANIFEST,
      digest: built.digest,
      size: built.manifest.length,
      artifactType: BUNDLE_MEDIA_TYPE,
      annotations,
    });
    assert.deepEqual([...built.blobs.keys()].sort(), [OCI_EMPTY.digest, bundleDigest].sort());
  });
});

/** A registry client stand-in: one image, the referrers it lists, and what is pushed to it. */
function standIn(listed: Pick<Referrers, "source" | "descriptors">) {
  const pushed = { blobs: [] as string[], manifests: [] as Array<{ reference: string; mediaType: string; body: Buffer }> };
  const client: ReleaseClient = {
    getManifest: async (ref) => {
      if (ref.digest !== DIGEST) throw new Error(`asked for ${ref.digest}`);
      return {
        digest: DIGEST,
        mediaType: OCI_IMAGE_MANIFEST,
        size: MANIFEST.length,
        body: MANIFEST,
        endpoint: "registry.example.com",
        credentialSource: "anonymous",
      } satisfies Manifest;
    },
    listReferrers: async () => ({ ...listed, endpoint: "registry.example.com", credentialSource: "anonymous" }),
    pushBlob: async (_repo, digest) => {
      pushed.blobs.push(digest);
      return { uploaded: true };
    },
    pushManifest: async (_repo, reference, mediaType, body) => {
      pushed.manifests.push({ reference, mediaType, body });
      return `sha256:${createHash("sha256").update(body).digest("hex")}`;
    },
  };
  return { client, pushed };
}

describe("signImage", () => {
  const key = releaseKey(p256().privateKey);
  const image = { registry: "registry.example.com", repository: "platform/imprimatur", digest: DIGEST };
  const now = () => new Date("2026-01-02T03:04:05.678Z");

  test("pushes the three referrers by digest; a registry with the Referrers API gets no tag", async () => {
    const { client, pushed } = standIn({ source: "api", descriptors: [] });
    const signed = await signImage(client, { image, key, imprimaturVersion: "0.1.0", sourceRevision: "abc", now });
    assert.deepEqual(
      signed.referrers.map((r) => [r.part, r.predicateType, r.artifactType]),
      [
        ["signature", COSIGN_SIGN_PREDICATE, BUNDLE_MEDIA_TYPE],
        ["sbom", SPDX_PREDICATE_TYPE, BUNDLE_MEDIA_TYPE],
        ["provenance", SLSA_PROVENANCE_PREDICATE_TYPE, BUNDLE_MEDIA_TYPE],
      ],
    );
    assert.deepEqual(
      pushed.manifests.map((m) => m.reference),
      signed.referrers.map((r) => r.digest),
    );
    assert.equal(signed.referrersSource, "api");
    assert.equal(signed.referrersIndex, undefined);
    assert.equal(signed.image, `${NAME}@${DIGEST}`);
    assert.equal(signed.key, key.fingerprint);
    assert.ok(pushed.blobs.includes(OCI_EMPTY.digest));
    const created = JSON.parse(pushed.manifests[0]!.body.toString()).annotations["org.opencontainers.image.created"];
    assert.equal(created, "2026-01-02T03:04:05Z");
    const provenance = JSON.parse(pushed.manifests[2]!.body.toString());
    assert.deepEqual(provenance.subject, { mediaType: OCI_IMAGE_MANIFEST, digest: DIGEST, size: MANIFEST.length });
  });

  test("without the Referrers API the referrers tag's index keeps what it listed and adds the new ones", async () => {
    const existing: ReferrerDescriptor = { mediaType: OCI_IMAGE_MANIFEST, digest: `sha256:${"1".repeat(64)}`, size: 10, artifactType: "application/example" };
    const { client, pushed } = standIn({ source: "tag-schema", descriptors: [existing] });
    const signed = await signImage(client, { image, key, imprimaturVersion: "0.1.0", parts: ["signature", "provenance"], now });
    const last = pushed.manifests.at(-1)!;
    assert.equal(last.reference, `sha256-${DIGEST.slice(7)}`);
    assert.equal(last.mediaType, OCI_IMAGE_INDEX);
    const index = JSON.parse(last.body.toString());
    assert.deepEqual(
      index.manifests.map((d: { digest: string }) => d.digest),
      [existing.digest, ...signed.referrers.map((r) => r.digest)],
    );
    assert.deepEqual(signed.referrersIndex, {
      tag: `sha256-${DIGEST.slice(7)}`,
      digest: `sha256:${createHash("sha256").update(last.body).digest("hex")}`,
      entries: 3,
    });
    assert.deepEqual(
      signed.referrers.map((r) => r.part),
      ["signature", "provenance"],
    );
    assert.equal(signed.sbomPackages, undefined, "no SBOM, no count of its packages");

    const none = standIn({ source: "none", descriptors: [] });
    const first = await signImage(none.client, { image, key, imprimaturVersion: "0.1.0", parts: ["signature"], now });
    assert.equal(first.referrersIndex?.entries, 1);
  });

  test("an image not named by a sha256 digest, or nothing to attach, is refused before anything is pushed", async () => {
    const { client, pushed } = standIn({ source: "api", descriptors: [] });
    await assert.rejects(
      signImage(client, { image: { ...image, digest: `sha512:${"a".repeat(128)}` }, key, imprimaturVersion: "0.1.0" }),
      (e: unknown) => e instanceof ReleaseError && e.code === "image",
    );
    await assert.rejects(
      signImage(client, { image, key, imprimaturVersion: "0.1.0", parts: [] }),
      (e: unknown) => e instanceof ReleaseError && e.code === "image",
    );
    assert.deepEqual(pushed.manifests, []);
  });
});
