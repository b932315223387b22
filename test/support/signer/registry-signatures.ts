// Cosign signatures and attestations for an image in a test registry, as `cosign sign` and `cosign attest` leave
// them: a `.sig` manifest (one simple-signing layer per signer) at the digest's signature tag, an `.att` manifest
// (one DSSE in-toto layer per statement) at its attestation tag, both naming the image `${registry.host}/${repository}`.
import type { TestRegistry } from "../registry.ts";
import {
  attestationTag,
  cosignAttestationLayer,
  cosignSignatureLayer,
  inTotoStatement,
  ociManifestWithLayers,
  signatureTag,
  simpleSigningPayload,
  type CosignSigner,
} from "./cosign-signatures.ts";
import { pushArtifact, type PushTarget } from "./oci-push.ts";

interface SignedImage {
  registry: Pick<TestRegistry, "host" | "url" | "caPem" | "username" | "password">;
  /** The image's repository: what the payload names, and where the manifest goes unless `signatureRepository`. */
  repository: string;
  digest: string;
  /** Who pushes. Default: the registry's first user. */
  pusher?: { username: string; password: string };
}

export interface CosignSignatures extends SignedImage {
  /** One layer each, in this order. */
  signers: CosignSigner[];
  /** The digest the payload claims. Default: `digest` (another one makes a signature for the wrong image). */
  signedDigest?: string;
  /** Where the `.sig` manifest goes (cosign's COSIGN_REPOSITORY). Default: `repository`. */
  signatureRepository?: string;
}

export interface CosignAttestations extends SignedImage {
  /** One layer each, in this order. */
  statements: Array<{ predicateType: string; predicate: unknown; signer: CosignSigner; /** Default: `digest`. */ subjectDigest?: string }>;
}

function pushTarget(image: SignedImage): PushTarget {
  const { url, caPem, username, password } = image.registry;
  return { url, caPem, username: image.pusher?.username ?? username, password: image.pusher?.password ?? password };
}

/** Signs the image with each signer and pushes the `.sig` manifest at signatureTag(digest). */
export async function pushCosignSignatures(s: CosignSignatures): Promise<void> {
  const payload = simpleSigningPayload({ dockerReference: `${s.registry.host}/${s.repository}`, digest: s.signedDigest ?? s.digest });
  const layers = await Promise.all(s.signers.map((signer) => cosignSignatureLayer({ ...signer, payload })));
  await pushArtifact(pushTarget(s), s.signatureRepository ?? s.repository, ociManifestWithLayers(layers), signatureTag(s.digest));
}

/** Signs each in-toto statement about the image and pushes the `.att` manifest at attestationTag(digest). */
export async function pushCosignAttestations(a: CosignAttestations): Promise<void> {
  const layers = await Promise.all(
    a.statements.map((s) =>
      cosignAttestationLayer({
        ...s.signer,
        statement: inTotoStatement({
          subjectName: `${a.registry.host}/${a.repository}`,
          digest: s.subjectDigest ?? a.digest,
          predicateType: s.predicateType,
          predicate: s.predicate,
        }),
      }),
    ),
  );
  await pushArtifact(pushTarget(a), a.repository, ociManifestWithLayers(layers), attestationTag(a.digest));
}
