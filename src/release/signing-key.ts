// The release signing key: an ECDSA P-256 private key in PEM, the kind `cosign generate-key-pair` makes, given
// unencrypted (PKCS#8 "PRIVATE KEY", or SEC 1 "EC PRIVATE KEY"). cosign's own "ENCRYPTED SIGSTORE PRIVATE KEY"
// format and passphrase-protected PKCS#8 are refused with what to do instead: the key is read by a script, and a
// passphrase would have to sit beside it anyway.
//
// Signing: ECDSA signatures are DER, over SHA-256 of the bytes. A DSSE envelope is signed over its
// pre-authentication encoding with SHA-256 whatever the curve: @sigstore/verify checks DSSE signatures with the
// key's default digest, which is SHA-256 for every EC curve (test/support/signer/keys.ts signs with other curves
// and algorithms through the same functions).
import { createHash, createPrivateKey, createPublicKey, sign, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { ReleaseError } from "./release-error.ts";

export type SignatureHash = "sha256" | "sha384" | "sha512";

/** What signs: a private key and the digest it signs with (null for Ed25519, which hashes on its own). */
export interface SignerKey {
  privateKey: KeyObject;
  hash: SignatureHash | null;
}

export interface ReleaseKey extends SignerKey {
  publicKey: KeyObject;
  /** SubjectPublicKeyInfo PEM: what an ImagePolicy's staticKey names. */
  publicKeyPem: string;
  /** DER SubjectPublicKeyInfo. */
  publicKeyDer: Buffer;
  /** The bundle's `verificationMaterial.publicKey.hint`: base64 SHA-256 of the DER SPKI. */
  hint: string;
  /** sha256:<hex> of the DER SPKI: how Imprimatur's decisions and audit records name a key signer. */
  fingerprint: string;
}

/** The P-256 curve, by the names Node.js reports. */
const P256 = new Set(["prime256v1", "P-256", "secp256r1"]);

/** Reads and checks the key file (see the top of this file); ReleaseError key-file, key-format or key-type. */
export function readSigningKey(path: string): ReleaseKey {
  let pem: string;
  try {
    pem = readFileSync(path, "utf8");
  } catch (e) {
    throw new ReleaseError("key-file", `cannot read the signing key ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { cause: e });
  }
  return parseSigningKey(pem, path);
}

/** The key of a PEM text; `source` names it in errors. */
export function parseSigningKey(pem: string, source: string): ReleaseKey {
  if (pem.includes("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----") || pem.includes("-----BEGIN ENCRYPTED COSIGN PRIVATE KEY-----")) {
    throw new ReleaseError(
      "key-format",
      `${source} is cosign's encrypted key format; give an unencrypted PKCS#8 PEM of an ECDSA P-256 key instead ` +
        "(openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 makes one; cosign import-key-pair takes it for cosign too)",
    );
  }
  if (pem.includes("-----BEGIN ENCRYPTED PRIVATE KEY-----")) {
    throw new ReleaseError("key-format", `${source} is encrypted with a passphrase; give it unencrypted (openssl pkey -in KEY -out PLAIN)`);
  }
  if (!/-----BEGIN (EC )?PRIVATE KEY-----/.test(pem)) {
    throw new ReleaseError("key-format", `${source} holds no PEM private key ("-----BEGIN PRIVATE KEY-----"): give the private key, not the public one`);
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: pem, format: "pem" });
  } catch (e) {
    throw new ReleaseError("key-format", `${source} is not a readable PEM private key: ${(e as Error).message}`, { cause: e });
  }
  const curve = privateKey.asymmetricKeyDetails?.namedCurve;
  if (privateKey.asymmetricKeyType !== "ec" || curve === undefined || !P256.has(curve)) {
    const what = privateKey.asymmetricKeyType === "ec" ? `an ECDSA key on ${curve ?? "an unnamed curve"}` : `a ${privateKey.asymmetricKeyType} key`;
    throw new ReleaseError("key-type", `${source} is ${what}; release images are signed with ECDSA P-256 keys (as cosign generate-key-pair makes)`);
  }
  return releaseKey(privateKey);
}

/** The public halves and names of a P-256 private key. */
export function releaseKey(privateKey: KeyObject): ReleaseKey {
  const publicKey = createPublicKey(privateKey);
  const publicKeyDer = publicKey.export({ format: "der", type: "spki" });
  return {
    privateKey,
    hash: "sha256",
    publicKey,
    publicKeyPem: publicKey.export({ format: "pem", type: "spki" }).toString(),
    publicKeyDer,
    hint: keyHint(publicKeyDer),
    fingerprint: `sha256:${createHash("sha256").update(publicKeyDer).digest("hex")}`,
  };
}

/** base64 SHA-256 of a DER SubjectPublicKeyInfo: the hint a key-signed bundle names its key by. */
export function keyHint(publicKeyDer: Buffer): string {
  return createHash("sha256").update(publicKeyDer).digest("base64");
}

/** Signs `bytes` (ECDSA signatures are DER, RSA is PKCS#1 v1.5). `hash` overrides the key's default digest. */
export function signBytes(key: SignerKey, bytes: Buffer | Uint8Array, hash: SignatureHash | null = key.hash): Buffer {
  const algorithm = key.privateKey.asymmetricKeyType === "ed25519" ? null : (hash ?? "sha256");
  return sign(algorithm, bytes, key.privateKey);
}

/** The digest to sign DSSE envelopes with so that @sigstore/verify (which uses the key's default digest) accepts them. */
export function dsseHash(key: Pick<SignerKey, "hash">): SignatureHash | null {
  return key.hash === null ? null : "sha256";
}
