// The test signer's artifacts go into a real registry (docker-registry, distribution 2.8) and come back byte for
// byte: a cosign `.sig` manifest by tag, a Sigstore bundle referrer manifest (subject, artifactType, empty config) by
// digest, and the referrers tag schema index — over Basic auth (htpasswd) and the Bearer token flow.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { MEDIA_TYPES } from "../support/oci-layout.ts";
import type { OciLayout } from "../support/oci-layout.ts";
import { startRegistry } from "../support/registry.ts";
import type { RegistryAuth, TestRegistry } from "../support/registry.ts";
import { cosignSignatureLayer, ociManifestWithLayers, signatureTag, simpleSigningPayload } from "../support/signer/cosign-signatures.ts";
import { generateSigningKey } from "../support/signer/keys.ts";
import { createMockSigstore } from "../support/signer/mock-sigstore.ts";
import type { MockSigstore } from "../support/signer/mock-sigstore.ts";
import { fetchBlob, fetchManifest, pushArtifact } from "../support/signer/oci-push.ts";
import { COSIGN_SIGN_PREDICATE_TYPE, imageSignatureBundle, referrerManifest, referrersTag, referrersTagIndex } from "../support/signer/sigstore-bundles.ts";
import { verifyBundle } from "../support/signer/reference-verify.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const REPOSITORY = "acme/app";
const WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const ISSUER = "https://token.actions.githubusercontent.com";

let sigstore: MockSigstore;
const layouts = new TestLayouts();

before(async () => {
  sigstore = await createMockSigstore();
});
after(() => teardown(layouts.removals()));

for (const auth of ["htpasswd", "token"] as RegistryAuth[]) {
  describe(`signer artifacts in a registry with ${auth} auth`, () => {
    let registry: TestRegistry;
    let image: OciLayout;

    before(async () => {
      registry = await startRegistry({ auth });
      image = await layouts.push(registry, REPOSITORY, "v1", { seed: `signer-push-${auth}` });
    });
    after(() => teardown([() => registry?.stop()]));

    test("a cosign .sig manifest with two signatures, pushed at sha256-<hex>.sig", async () => {
      const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
      const payload = simpleSigningPayload({ dockerReference: `${registry.host}/${REPOSITORY}`, digest: image.digest });
      const built = ociManifestWithLayers([
        await cosignSignatureLayer({ payload, keyless: cert, rekor: sigstore, timestamp: sigstore }),
        await cosignSignatureLayer({ payload, key: generateSigningKey() }),
      ]);
      const tag = signatureTag(image.digest);
      const digest = await pushArtifact(registry, REPOSITORY, built, tag);
      assert.equal(digest, built.digest);

      const back = await registry.inspectRaw(REPOSITORY, tag);
      assert.deepEqual(back.raw, built.manifest);
      const fetched = await fetchManifest(registry, REPOSITORY, tag, [MEDIA_TYPES.manifest]);
      assert.equal(fetched.mediaType, MEDIA_TYPES.manifest);
      assert.equal(fetched.digest, built.digest);
    });

    test("a Sigstore bundle referrer by digest, and the referrers tag index at sha256-<hex>", async () => {
      const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
      const bundle = await imageSignatureBundle({ name: `${registry.host}/${REPOSITORY}`, digest: image.digest, keyless: cert, rekor: sigstore });
      verifyBundle(sigstore.trustedRoot, bundle.bytes, { policy: { subjectAlternativeName: WORKFLOW } });
      const referrer = referrerManifest({
        bundleBytes: bundle.bytes,
        bundleMediaType: bundle.mediaType,
        subject: { mediaType: image.mediaType, digest: image.digest, size: image.size },
        predicateType: COSIGN_SIGN_PREDICATE_TYPE,
        content: "dsse-envelope",
      });
      assert.equal(await pushArtifact(registry, REPOSITORY, referrer, referrer.digest), referrer.digest);
      const index = referrersTagIndex([referrer.descriptor]);
      assert.equal(await pushArtifact(registry, REPOSITORY, index, referrersTag(image.digest)), index.digest);

      const backReferrer = await fetchManifest(registry, REPOSITORY, referrer.digest, [MEDIA_TYPES.manifest]);
      assert.deepEqual(backReferrer.bytes, referrer.manifest);
      const parsed = JSON.parse(backReferrer.bytes.toString());
      assert.equal(parsed.artifactType, "application/vnd.dev.sigstore.bundle.v0.3+json");
      assert.equal(parsed.subject.digest, image.digest);

      const backIndex = await registry.inspectRaw(REPOSITORY, referrersTag(image.digest));
      assert.deepEqual(backIndex.raw, index.manifest);
      assert.deepEqual(JSON.parse(backIndex.raw.toString()).manifests, [referrer.descriptor]);

      // The bundle blob itself comes back intact and still verifies.
      const layerDigest: string = parsed.layers[0].digest;
      const blob = await fetchBlob(registry, REPOSITORY, layerDigest);
      assert.deepEqual(blob, bundle.bytes);
      verifyBundle(sigstore.trustedRoot, blob);
    });
  });
}
