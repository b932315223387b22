// Notary Project signatures on images already in a test registry, as `notation sign` leaves them: the image's
// manifest read back for its descriptor, one JWS or COSE envelope over it by a test PKI's leaf
// (test/support/notation/test-pki.ts), pushed with the referrers tag schema's index (notation-push.ts). Shared set-up
// for the e2e files that sign with Notation; it shares no code with src/.
import { createHash } from "node:crypto";
import type { TestRegistry } from "../registry.ts";
import type { PushTarget } from "../signer/oci-push.ts";
import { signCoseEnvelope } from "./cose-signer.ts";
import { notationPayload, signJwsEnvelope } from "./jws-signer.ts";
import { pushNotationSignatures } from "./notation-push.ts";
import type { TestCertificate } from "./test-pki.ts";

/** The descriptor a Notary payload names: the image manifest's media type, digest and size. */
export interface NotationSubject {
  mediaType: string;
  digest: string;
  size: number;
}

/** Who signs: the leaf's key signs, the chain (leaf first, DER) goes into the envelope. */
export interface NotationSigner {
  leaf: TestCertificate;
  chain: Uint8Array[];
}

export type EnvelopeFormat = "jws" | "cose";

/** The manifest `repository:ref` (a tag or digest) as the registry serves it, as a descriptor. */
export async function imageSubject(registry: Pick<TestRegistry, "inspectRaw">, repository: string, ref: string): Promise<NotationSubject> {
  const { raw, digest } = await registry.inspectRaw(repository, ref);
  return { mediaType: (JSON.parse(raw.toString()) as { mediaType: string }).mediaType, digest, size: raw.length };
}

/** One envelope over `subject` by `signer`, as pushNotationSignatures takes it. */
export function notationEnvelope(subject: NotationSubject, signer: NotationSigner, format: EnvelopeFormat = "jws") {
  const payload = notationPayload(subject);
  if (format === "cose")
    return {
      mediaType: "application/cose",
      body: signCoseEnvelope({ payload: new TextEncoder().encode(payload), signer: signer.leaf, chain: signer.chain }),
      chain: signer.chain,
    };
  return { mediaType: "application/jose+json", body: signJwsEnvelope({ payload, signer: signer.leaf, chain: signer.chain }), chain: signer.chain };
}

/**
 * Signs `repository:ref` with one Notation signature and pushes it as notation 1.x does against a registry without
 * the Referrers API. Returns the subject signed and the signature manifest's digest (the referrer that evidence names).
 */
export async function signImageWithNotation(
  registry: Pick<TestRegistry, "inspectRaw">,
  target: PushTarget,
  repository: string,
  ref: string,
  signer: NotationSigner,
  format: EnvelopeFormat = "jws",
): Promise<{ subject: NotationSubject; referrer: string }> {
  const subject = await imageSubject(registry, repository, ref);
  const [pushed] = await pushNotationSignatures(target, repository, subject, [notationEnvelope(subject, signer, format)]);
  return { subject, referrer: pushed!.digest };
}

/** A certificate's fingerprint as Notation evidence names it: `sha256:` and the hex SHA-256 of its DER. */
export function certificateFingerprint(cert: Pick<TestCertificate, "der">): string {
  return `sha256:${createHash("sha256").update(cert.der).digest("hex")}`;
}
