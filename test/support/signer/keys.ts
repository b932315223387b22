// Test signer: signing keys of every algorithm cosign and Sigstore use, and raw signing with them.
//
// Exists so tests can make real signatures offline. The digest each key signs with by default follows the curve
// (P-256 and RSA: SHA-256, P-384: SHA-384, P-521: SHA-512, Ed25519: none), which is what a message-signature
// bundle names in messageDigest.algorithm and what @sigstore/verify then verifies with. Caveat: @sigstore/verify
// checks DSSE signatures (and tlog SETs) with `crypto.verify(undefined, …)`, i.e. OpenSSL's default digest, which
// is SHA-256 for every EC curve; so DSSE envelopes meant for it are signed with SHA-256 whatever the curve (see
// dsseHash). cosign's legacy signer (LoadECDSASignerVerifier with crypto.SHA256) also hashes with SHA-256 for
// any curve; pass `hash` to signBytes to produce that. Signing itself (signBytes, dsseHash, the key hint) is the
// release signer's, src/release/signing-key.ts: one copy for the product and the tests.

import { generateKeyPairSync } from "node:crypto";
import type { KeyObject } from "node:crypto";
import { PublicKeyDetails } from "@sigstore/protobuf-specs";
import type { PublicKey } from "@sigstore/protobuf-specs";
import { keyHint, type SignatureHash } from "../../../src/release/signing-key.ts";
import { recordPrivateKey } from "../secret-ledger.ts";

export { dsseHash, signBytes, type SignatureHash } from "../../../src/release/signing-key.ts";

export type KeyAlgorithm = "ecdsa-p256" | "ecdsa-p384" | "ecdsa-p521" | "rsa-2048" | "ed25519";

export interface SigningKey {
  algorithm: KeyAlgorithm;
  privateKey: KeyObject;
  publicKey: KeyObject;
  publicKeyPem: string;
  /** DER SubjectPublicKeyInfo. */
  publicKeyDer: Buffer;
  /** The digest signBytes uses unless told otherwise; null for Ed25519 (pure). */
  hash: SignatureHash | null;
  /** The protobuf-specs PublicKeyDetails name, for trusted public keys. */
  keyDetails: string;
  /** base64 sha256 of the DER SPKI: the bundle `publicKey.hint` this key gets by default. */
  hint: string;
}

const CURVES: Record<string, { namedCurve: string; hash: SignatureHash; keyDetails: string }> = {
  "ecdsa-p256": { namedCurve: "P-256", hash: "sha256", keyDetails: "PKIX_ECDSA_P256_SHA_256" },
  "ecdsa-p384": { namedCurve: "P-384", hash: "sha384", keyDetails: "PKIX_ECDSA_P384_SHA_384" },
  "ecdsa-p521": { namedCurve: "P-521", hash: "sha512", keyDetails: "PKIX_ECDSA_P521_SHA_512" },
};

export function generateSigningKey(algorithm: KeyAlgorithm = "ecdsa-p256"): SigningKey {
  let pair: { privateKey: KeyObject; publicKey: KeyObject };
  let hash: SignatureHash | null;
  let keyDetails: string;
  const curve = CURVES[algorithm];
  if (curve !== undefined) {
    pair = generateKeyPairSync("ec", { namedCurve: curve.namedCurve });
    hash = curve.hash;
    keyDetails = curve.keyDetails;
  } else if (algorithm === "rsa-2048") {
    pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
    hash = "sha256";
    keyDetails = "PKIX_RSA_PKCS1V15_2048_SHA256";
  } else if (algorithm === "ed25519") {
    pair = generateKeyPairSync("ed25519");
    hash = null;
    keyDetails = "PKIX_ED25519";
  } else {
    throw new Error(`unknown key algorithm ${String(algorithm)}`);
  }
  return fromKeyPair(algorithm, pair, hash, keyDetails);
}

function fromKeyPair(
  algorithm: KeyAlgorithm,
  pair: { privateKey: KeyObject; publicKey: KeyObject },
  hash: SignatureHash | null,
  keyDetails: string,
): SigningKey {
  recordPrivateKey(pair.privateKey, "a signing key");
  const publicKeyDer = pair.publicKey.export({ format: "der", type: "spki" });
  return {
    algorithm,
    privateKey: pair.privateKey,
    publicKey: pair.publicKey,
    publicKeyPem: pair.publicKey.export({ format: "pem", type: "spki" }).toString(),
    publicKeyDer,
    hash,
    keyDetails,
    hint: keyHint(publicKeyDer),
  };
}

/**
 * The `keys` argument of @sigstore/verify's toTrustMaterial for these keys, by hint (default: each key's own).
 * validFor starts at the Unix epoch so any signing time passes.
 */
export function trustedPublicKeys(keys: Array<SigningKey | { key: SigningKey; hint: string }>): Record<string, PublicKey> {
  const out: Record<string, PublicKey> = {};
  for (const entry of keys) {
    const key = "key" in entry ? entry.key : entry;
    out[entry.hint] = {
      rawBytes: key.publicKeyDer,
      keyDetails: PublicKeyDetails[key.keyDetails as keyof typeof PublicKeyDetails],
      validFor: { start: new Date(0), end: undefined },
    };
  }
  return out;
}
