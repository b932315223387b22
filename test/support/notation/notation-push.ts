// Pushes Notary Project signatures to a real registry as notation 1.x does: a signature manifest (an OCI image
// manifest whose config is `{}` of media type application/vnd.cncf.notary.signature, one layer the envelope, the
// image as its subject, the chain's thumbprints as an annotation), by digest, and listed in the referrers tag
// schema's index (docker-registry 2.8 has no Referrers API). Written for tests; it shares no code with src/.
import { createHash } from "node:crypto";
import { X509Certificate } from "node:crypto";
import { pushArtifact, type PushTarget } from "../signer/oci-push.ts";

const NOTARY = "application/vnd.cncf.notary.signature";
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX = "application/vnd.oci.image.index.v1+json";

const sha256 = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

export interface NotationSignatureArtifact {
  manifest: Buffer;
  digest: string;
  /** As the referrers index lists it. */
  descriptor: { mediaType: string; digest: string; size: number; artifactType: string };
}

/** The signature manifest for one envelope (`mediaType` application/jose+json or application/cose). */
export function notationSignatureManifest(
  envelope: { mediaType: string; body: Uint8Array; chain?: Uint8Array[] },
  subject: { mediaType: string; digest: string; size: number },
) {
  const config = Buffer.from("{}");
  const body = Buffer.from(envelope.body);
  const thumbprints = (envelope.chain ?? []).map((der) => createHash("sha256").update(new X509Certificate(der).raw).digest("hex"));
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: NOTARY, digest: sha256(config), size: config.length },
      layers: [{ mediaType: envelope.mediaType, digest: sha256(body), size: body.length }],
      subject,
      annotations: { "io.cncf.notary.x509chain.thumbprint#S256": JSON.stringify(thumbprints) },
    }),
  );
  const digest = sha256(manifest);
  return {
    artifact: {
      manifest,
      mediaType: OCI_MANIFEST,
      blobs: new Map([
        [sha256(config), config],
        [sha256(body), body],
      ]),
    },
    signature: {
      manifest,
      digest,
      descriptor: { mediaType: OCI_MANIFEST, digest, size: manifest.length, artifactType: NOTARY },
    } satisfies NotationSignatureArtifact,
  };
}

/**
 * Pushes each envelope's signature manifest and a referrers tag index listing them and `others` (referrers pushed
 * before, which the index would otherwise drop).
 */
export async function pushNotationSignatures(
  target: PushTarget,
  repository: string,
  subject: { mediaType: string; digest: string; size: number },
  envelopes: Array<{ mediaType: string; body: Uint8Array; chain?: Uint8Array[] }>,
  others: Array<{ mediaType: string; digest: string; size: number; artifactType?: string }> = [],
): Promise<NotationSignatureArtifact[]> {
  const pushed: NotationSignatureArtifact[] = [];
  for (const envelope of envelopes) {
    const { artifact, signature } = notationSignatureManifest(envelope, subject);
    await pushArtifact(target, repository, artifact, signature.digest);
    pushed.push(signature);
  }
  const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [...others, ...pushed.map((p) => p.descriptor)] }));
  await pushArtifact(target, repository, { manifest: index, mediaType: OCI_INDEX, blobs: new Map() }, subject.digest.replace(":", "-"));
  return pushed;
}
