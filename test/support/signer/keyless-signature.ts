// A keyless signature attached to an image in a test registry as Sigstore does it without the Referrers API: a DSSE
// bundle with a certificate from the mock Fulcio, logged in the mock Rekor, pushed as a referrer manifest and listed
// in the referrers tag index (docker-registry 2.8 has no Referrers API).
import type { TestRegistry } from "../registry.ts";
import type { MockSigstore } from "./mock-sigstore.ts";
import { pushArtifact, type PushTarget } from "./oci-push.ts";
import { COSIGN_SIGN_PREDICATE_TYPE, imageSignatureBundle, referrerManifest, referrersTag, referrersTagIndex } from "./sigstore-bundles.ts";

export interface KeylessSignature {
  registry: TestRegistry;
  /** Who pushes (a user that may). */
  target: PushTarget;
  sigstore: MockSigstore;
  repository: string;
  /** The image's tag, to read its manifest (the referrer's subject). */
  tag: string;
  digest: string;
  /** The certificate's identity (a workflow URI, an email) and its OIDC issuer. */
  subjectAltName: string;
  issuer: string;
}

export async function attachKeylessSignature(s: KeylessSignature): Promise<void> {
  const cert = await s.sigstore.issueKeylessCertificate({ subjectAltName: s.subjectAltName, issuer: s.issuer });
  const bundle = await imageSignatureBundle({ name: `${s.registry.host}/${s.repository}`, digest: s.digest, keyless: cert, rekor: s.sigstore, version: "0.3" });
  const { raw } = await s.registry.inspectRaw(s.repository, s.tag);
  const subject = { mediaType: (JSON.parse(raw.toString()) as { mediaType: string }).mediaType, digest: s.digest, size: raw.length };
  const referrer = referrerManifest({
    bundleBytes: bundle.bytes,
    bundleMediaType: bundle.mediaType,
    subject,
    predicateType: COSIGN_SIGN_PREDICATE_TYPE,
    content: "dsse-envelope",
  });
  await pushArtifact(s.target, s.repository, referrer, referrer.digest);
  await pushArtifact(s.target, s.repository, referrersTagIndex([referrer.descriptor]), referrersTag(s.digest));
}
