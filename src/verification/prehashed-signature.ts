// A signature checked against the digest of the signed bytes when only the digest is known (`verify-bundle
// sha256:…`, as Sigstore's conformance suite asks). node:crypto verifies only over the bytes themselves, so ECDSA
// is verified with @noble/curves (audited, and able to take the message hash as input), and RSA PKCS#1 v1.5 by
// opening the signature to its DigestInfo. Ed25519 and RSA-PSS sign the message, not a digest of it: refused.
import { constants, publicDecrypt, type KeyObject } from "node:crypto";
import { p256, p384, p521 } from "@noble/curves/nist.js";

export type PrehashedResult = { ok: true } | { ok: false; reason: string };

const ECDSA_CURVES = { "P-256": p256, "P-384": p384, "P-521": p521 } as const;

/** SHA-256's DigestInfo prefix (RFC 8017 §9.2, note 1). */
const SHA256_DIGEST_INFO = Buffer.from("3031300d060960864801650304020105000420", "hex");

/** Whether `signature` by `key` signs the SHA-256 `digest`. */
export function verifyPrehashed(key: KeyObject, digest: Buffer, signature: Buffer): PrehashedResult {
  if (digest.length !== 32) return { ok: false, reason: "only a sha256 digest can stand in for the artifact" };
  if (key.asymmetricKeyType === "ec") {
    const jwk = key.export({ format: "jwk" });
    const curve = jwk.crv ? ECDSA_CURVES[jwk.crv as keyof typeof ECDSA_CURVES] : undefined;
    if (!curve || !jwk.x || !jwk.y) return { ok: false, reason: `ECDSA on curve ${jwk.crv ?? "?"} cannot be verified from a digest` };
    const point = Buffer.concat([Buffer.from([4]), Buffer.from(jwk.x, "base64url"), Buffer.from(jwk.y, "base64url")]);
    let verified: boolean;
    try {
      // The digest is the message hash (prehash: false); signatures of Go's and OpenSSL's signers are not low-S.
      verified = curve.verify(signature, digest, point, { prehash: false, lowS: false, format: "der" });
    } catch {
      verified = false; // not a DER signature
    }
    return verified ? { ok: true } : { ok: false, reason: "the signature does not verify with this key" };
  }
  if (key.asymmetricKeyType === "rsa") {
    let opened: Buffer;
    try {
      opened = publicDecrypt({ key, padding: constants.RSA_PKCS1_PADDING }, signature);
    } catch {
      return { ok: false, reason: "the signature does not verify with this key" };
    }
    return opened.equals(Buffer.concat([SHA256_DIGEST_INFO, digest])) ? { ok: true } : { ok: false, reason: "the signature does not verify with this key" };
  }
  return { ok: false, reason: `a ${key.asymmetricKeyType ?? "?"} signature covers the artifact itself: give the file, not its digest` };
}
