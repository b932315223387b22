// Whether one signature satisfies one attestor entry for one image digest. The cryptography, certificate
// chains, SCTs, transparency-log promises and proofs and RFC 3161 timestamps are Sigstore's own verifier
// (@sigstore/verify); this file chooses its thresholds from the entry, matches the identity, and checks
// that what was signed names the admitted digest (a valid signature for another image proves nothing).
import { createHash, createPublicKey, type KeyObject } from "node:crypto";
import type { Bundle } from "@sigstore/bundle";
import { HashAlgorithm } from "@sigstore/protobuf-specs";
import { verify as verifySignatureBytes } from "node:crypto";
import { toSignedEntity, Verifier, type SignedEntity, type Signer, type TrustMaterial } from "@sigstore/verify";
import type { KeylessAttestor, LeafAttestor, SignerEvidence } from "../core/image-policy/attestors.ts";
import { matchOutcome } from "../core/primitives/linear-regex.ts";
import type { SigstoreTrust } from "../core/trust-root/trust-root-kind.ts";
import { verifyPrehashed } from "./prehashed-signature.ts";
import { COSIGN_SIGN_PREDICATE, type SignedItem } from "./signed-item.ts";

/** `notThisSigner`: the signature is simply someone else's (not worth naming when another reason exists). */
export type ItemOutcome = { ok: true; evidence: SignerEvidence } | { ok: false; reason: string; notThisSigner?: boolean };

export interface EntryContext {
  /** What the signed content must say (e.g. the admitted digest): a reason when it does not. */
  binding: (item: SignedItem) => string | undefined;
  /** The Sigstore trusted root the entry names (undefined: none loaded by that name, or it holds no Sigstore root). */
  trustRoot: SigstoreTrust | undefined;
  /** The entry's public key (static keys), already resolved. */
  key?: KeyObject;
  /**
   * The SHA-256 of the signed bytes when only it is known (verify-bundle given sha256:…): a message signature
   * without its artifact is then checked against it, and its message digest must be it.
   */
  artifactDigest?: Buffer;
}

const IN_TOTO_PAYLOAD = "application/vnd.in-toto+json";
const IN_TOTO_STATEMENTS = new Set(["https://in-toto.io/Statement/v0.1", "https://in-toto.io/Statement/v1"]);
const SIMPLE_SIGNING_TYPE = "cosign container image signature";

export function verifyItem(item: SignedItem, entry: LeafAttestor, cx: EntryContext): ItemOutcome {
  // A notary entry is met by Notary Project signatures (verify-notary-entry.ts), never by a Sigstore one.
  if (entry.type === "notary") return { ok: false, reason: "a notary entry is met by Notary Project signatures only", notThisSigner: true };
  if (!cx.trustRoot && (entry.type === "keyless" || !entry.ignoreTlog))
    return { ok: false, reason: `trust root ${JSON.stringify(entry.trustRoot)} is not loaded` };
  let bundle = item.bundle;
  const signed = signedBytes(item, cx.artifactDigest);
  if ("reason" in signed) return { ok: false, reason: signed.reason };
  if (entry.ignoreTlog) bundle = withoutTransparency(bundle, entry.type === "staticKey");
  let signer: Signer;
  if (entry.type === "staticKey") {
    if (!cx.key) return { ok: false, reason: "the key is not available" };
    // A key entry checks the signature with its key, whatever key material the signature carries (cosign --key).
    bundle = withPublicKey(bundle);
    const material = keyMaterial(cx.trustRoot, cx.key);
    const attempt = runVerifier(material, { tlogThreshold: entry.ignoreTlog ? 0 : 1, ctlogThreshold: 0, timestampThreshold: 0 }, bundle, signed);
    if (!attempt.ok) {
      if (attempt.code !== "TLOG_ERROR" || bundle.verificationMaterial?.tlogEntries.length !== 0) return failure(attempt);
      // Say whether the key signed at all: the log entry is what is missing, and ignoreTlog would accept it.
      const unlogged = runVerifier(material, { tlogThreshold: 0, ctlogThreshold: 0, timestampThreshold: 0 }, bundle, signed);
      if (!unlogged.ok) return failure(unlogged);
      const bound = cx.binding(item);
      if (bound) return { ok: false, reason: bound };
      return { ok: false, reason: "signed by this key, but without a transparency-log entry (ignoreTlog: true accepts that)" };
    }
    signer = attempt.signer;
  } else {
    if (bundle.verificationMaterial?.content?.$case === "publicKey") return { ok: false, reason: "signed with a key, not a certificate", notThisSigner: true };
    const attempt = runVerifier(
      keyMaterial(cx.trustRoot, undefined),
      { tlogThreshold: entry.ignoreTlog ? 0 : 1, ctlogThreshold: cx.trustRoot?.hasCtLogs ? 1 : 0, timestampThreshold: 1 },
      bundle,
      signed,
    );
    if (!attempt.ok) return failure(attempt);
    signer = attempt.signer;
    const identity = identityProblem(entry, signer);
    if (identity) return { ok: false, reason: identity };
  }
  // Only now, for a signature by this signer, does it matter what it signed.
  const bound = cx.binding(item);
  if (bound) return { ok: false, reason: bound };
  const trusted = signingTime(bundle);
  const tlog = bundle.verificationMaterial?.tlogEntries[0];
  return {
    ok: true,
    evidence: {
      entry: entry.path,
      attestor: entry.label,
      signer:
        entry.type === "staticKey"
          ? `key ${fingerprint(cx.key!)}`
          : `subject ${signer.identity?.subjectAlternativeName ?? "?"} issuer ${signer.identity?.extensions?.issuer ?? "?"}`,
      format: item.format,
      ...(tlog ? { tlogIndex: tlog.logIndex } : {}),
      ...(trusted ? { signedAt: trusted.toISOString() } : {}),
    },
  };
}

function failure(run: Extract<VerifierRun, { ok: false }>): ItemOutcome {
  return { ok: false, reason: run.reason, ...(run.notThisSigner ? { notThisSigner: true } : {}) };
}

type VerifierRun = { ok: true; signer: Signer } | { ok: false; reason: string; code?: string; notThisSigner?: boolean };

/** What a message signature is checked against: the bytes, or only their SHA-256 digest. */
type SignedBytes = { artifact?: Buffer; digest?: Buffer };

function signedBytes(item: SignedItem, artifactDigest: Buffer | undefined): SignedBytes | { reason: string } {
  const content = item.bundle.content;
  if (content.$case !== "messageSignature" || item.artifact || !artifactDigest) return item.artifact ? { artifact: item.artifact } : {};
  const { messageDigest } = content.messageSignature;
  const sha256 = messageDigest?.algorithm === HashAlgorithm.SHA2_256 || messageDigest?.algorithm === HashAlgorithm.HASH_ALGORITHM_UNSPECIFIED;
  if (!messageDigest || !sha256 || !messageDigest.digest.equals(artifactDigest)) return { reason: "the bundle's message digest is not the artifact's" };
  return { digest: artifactDigest };
}

function runVerifier(material: TrustMaterial, options: ConstructorParameters<typeof Verifier>[1], bundle: Bundle, signed: SignedBytes): VerifierRun {
  const prehashed: { problem?: string } = {};
  try {
    return { ok: true, signer: new Verifier(material, options).verify(signedEntity(bundle, signed, prehashed)) };
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    return {
      ok: false,
      reason: code === "SIGNATURE_ERROR" && prehashed.problem ? prehashed.problem : describeVerificationError(e),
      ...(typeof code === "string" ? { code } : {}),
      ...(code === "SIGNATURE_ERROR" ? { notThisSigner: true } : {}),
    };
  }
}

/** An image signature: what the signed content says it signs must be the admitted digest. */
export function imageBinding(digest: string): (item: SignedItem) => string | undefined {
  return (item) => bindingProblem(item, digest);
}

function bindingProblem(item: SignedItem, digest: string): string | undefined {
  const [algorithm, hex] = digest.split(":") as [string, string];
  const content = item.bundle.content;
  if (content.$case === "messageSignature") {
    if (!item.artifact) return "a message signature without the bytes it signs";
    if (item.format === "cosign-signature") {
      let parsed: unknown;
      try {
        parsed = JSON.parse(item.artifact.toString("utf8"));
      } catch {
        return "the signed payload is not JSON";
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return "the signed payload is not a JSON object";
      const payload = parsed as { critical?: { image?: { "docker-manifest-digest"?: unknown }; type?: unknown } };
      const signed = payload.critical?.image?.["docker-manifest-digest"];
      if (typeof payload.critical?.type !== "string" || payload.critical.type.toLowerCase() !== SIMPLE_SIGNING_TYPE)
        return `the signed payload is not a ${JSON.stringify(SIMPLE_SIGNING_TYPE)}`;
      if (signed !== digest) return `signs ${typeof signed === "string" ? signed : "no digest"}, not ${digest}`;
      return undefined;
    }
    // A bundle attached to the image signs the image manifest itself.
    const signed = createHash(algorithm === "sha512" ? "sha512" : "sha256")
      .update(item.artifact)
      .digest("hex");
    if (signed !== hex || !content.messageSignature.messageDigest?.digest.equals(Buffer.from(hex, "hex")))
      return `the bundle's message digest is not ${digest}`;
    return undefined;
  }
  return statementProblem(item, digest, COSIGN_SIGN_PREDICATE);
}

/** An attestation: a DSSE in-toto statement of `predicateType` whose subject is the admitted digest. */
export function attestationBinding(digest: string, predicateType: string): (item: SignedItem) => string | undefined {
  return (item) =>
    item.bundle.content.$case === "dsseEnvelope" ? statementProblem(item, digest, predicateType) : "a message signature, not an in-toto attestation";
}

/** The in-toto statement a DSSE bundle carries; an error in words when it carries none. */
export function inTotoStatement(
  item: SignedItem,
): { statement: { _type?: unknown; subject?: unknown; predicateType?: unknown; predicate?: unknown } } | { error: string } {
  if (item.bundle.content.$case !== "dsseEnvelope") return { error: "not a DSSE envelope" };
  const envelope = item.bundle.content.dsseEnvelope;
  if (envelope.payloadType !== IN_TOTO_PAYLOAD) return { error: `DSSE payload type ${JSON.stringify(envelope.payloadType)} is not an in-toto statement` };
  let statement: { _type?: unknown; subject?: unknown; predicateType?: unknown; predicate?: unknown };
  try {
    statement = JSON.parse(envelope.payload.toString("utf8")) as typeof statement;
  } catch {
    return { error: "the in-toto statement is not JSON" };
  }
  if (typeof statement !== "object" || statement === null) return { error: "the in-toto statement is not an object" };
  if (!IN_TOTO_STATEMENTS.has(statement._type as string)) return { error: `unknown in-toto statement type ${JSON.stringify(statement._type ?? null)}` };
  return { statement };
}

function statementProblem(item: SignedItem, digest: string, predicateType: string): string | undefined {
  const [algorithm, hex] = digest.split(":") as [string, string];
  const read = inTotoStatement(item);
  if ("error" in read) return read.error;
  const { statement } = read;
  if (statement.predicateType !== predicateType)
    return predicateType === COSIGN_SIGN_PREDICATE
      ? `an attestation of type ${JSON.stringify(statement.predicateType ?? null)}, not an image signature (${COSIGN_SIGN_PREDICATE})`
      : `a statement of type ${JSON.stringify(statement.predicateType ?? null)}, not ${predicateType}`;
  const subjects = Array.isArray(statement.subject) ? (statement.subject as Array<{ digest?: Record<string, unknown> }>) : [];
  if (!subjects.some((s) => s?.digest?.[algorithm] === hex)) return `the statement's subject is not ${digest}`;
  return undefined;
}

function identityProblem(entry: KeylessAttestor, signer: Signer): string | undefined {
  const san = signer.identity?.subjectAlternativeName;
  const issuer = signer.identity?.extensions?.issuer;
  const subject = san === undefined ? "mismatch" : matchOutcome(entry.subject, san);
  if (subject !== "match")
    return subject === "mismatch"
      ? `certificate identity ${JSON.stringify(san ?? null)} does not match ${JSON.stringify(entry.subject.source)}`
      : `certificate identity cannot be checked: ${subject.error}`;
  const issuerOutcome = issuer === undefined ? "mismatch" : matchOutcome(entry.issuer, issuer);
  if (issuerOutcome !== "match")
    return issuerOutcome === "mismatch"
      ? `certificate issuer ${JSON.stringify(issuer ?? null)} does not match ${JSON.stringify(entry.issuer.source)}`
      : `certificate issuer cannot be checked: ${issuerOutcome.error}`;
  for (const ext of entry.extensions) {
    const found = signer.identity?.oids?.find((o) => o.oid?.id.join(".") === ext.oid);
    const value = found ? extensionText(found.value) : undefined;
    if (value !== ext.value) return `certificate extension ${ext.name} is ${JSON.stringify(value ?? null)}, not ${JSON.stringify(ext.value)}`;
  }
  return undefined;
}

/** Fulcio's legacy extensions hold raw text; newer ones a DER UTF8String. */
function extensionText(value: Buffer): string {
  if (value.length >= 2 && value[0] === 0x0c) {
    let length = value[1]!;
    let offset = 2;
    if (length & 0x80) {
      const bytes = length & 0x7f;
      length = value.subarray(2, 2 + bytes).reduce((n, b) => n * 256 + b, 0);
      offset = 2 + bytes;
    }
    if (offset + length === value.length) return value.subarray(offset).toString("utf8");
  }
  return value.toString("utf8");
}

/**
 * Sigstore's entity, except that a message signature also verifies with the hash its key type implies: cosign
 * signs with Ed25519 keys over the message itself (no hash) and with P-384/P-521 keys over SHA-384/SHA-512,
 * while a `.sig` layer says nothing about the hash. The check is still node:crypto's verify.
 */
function signedEntity(bundle: Bundle, { artifact, digest }: SignedBytes, prehashed: { problem?: string }): SignedEntity {
  const entity = toSignedEntity(bundle, artifact);
  if (bundle.content.$case !== "messageSignature") return entity;
  const base = entity.signature;
  if (!artifact && digest) {
    // Only the digest is known: the signature is checked against it (ECDSA, RSA PKCS#1 v1.5).
    const verifySignature = (key: KeyObject) => {
      const result = verifyPrehashed(key, digest, base.signature);
      if (!result.ok) prehashed.problem = result.reason;
      return result.ok;
    };
    return { ...entity, signature: { ...signatureMethods(base), verifySignature } };
  }
  if (!artifact) return entity;
  return {
    ...entity,
    signature: {
      ...signatureMethods(base),
      verifySignature: (key) => base.verifySignature(key) || impliedHashes(key).some((hash) => safeVerify(hash, artifact, key, base.signature)),
    },
  };
}

function signatureMethods(base: SignedEntity["signature"]): Omit<SignedEntity["signature"], "verifySignature"> {
  return {
    signature: base.signature,
    compareSignature: (sig) => base.compareSignature(sig),
    compareDigest: (digest) => base.compareDigest(digest),
    compareSignedDigest: (digest) => base.compareSignedDigest(digest),
  };
}

function impliedHashes(key: KeyObject): Array<string | null> {
  if (key.asymmetricKeyType === "ed25519") return [null];
  const curve = key.asymmetricKeyDetails?.namedCurve;
  if (curve === "secp384r1") return ["sha384"];
  if (curve === "secp521r1") return ["sha512"];
  return [];
}

function safeVerify(hash: string | null, data: Buffer, key: KeyObject, signature: Buffer): boolean {
  try {
    return verifySignatureBytes(hash, data, key, signature);
  } catch {
    return false;
  }
}

function keyMaterial(root: SigstoreTrust | undefined, key: KeyObject | undefined): TrustMaterial {
  const base: Omit<TrustMaterial, "publicKey"> = root?.material ?? { certificateAuthorities: [], timestampAuthorities: [], tlogs: [], ctlogs: [] };
  return {
    ...base,
    publicKey: () => {
      // Unreachable (a key-signed bundle is refused before a keyless check); a plain Error because the verifier's
      // failures are described by their code (describeVerificationError), which would then lead the reason.
      if (!key) throw new Error("no public key for this entry");
      return { publicKey: key, validFor: () => true };
    },
  };
}

function withPublicKey(bundle: Bundle): Bundle {
  const vm = bundle.verificationMaterial!;
  return { ...bundle, verificationMaterial: { ...vm, content: { $case: "publicKey", publicKey: { hint: "" } } } };
}

/** ignoreTlog: log entries are neither required nor consulted (a key entry needs no trusted time either). */
function withoutTransparency(bundle: Bundle, dropTimestamps: boolean): Bundle {
  const vm = bundle.verificationMaterial!;
  return {
    ...bundle,
    verificationMaterial: {
      ...vm,
      tlogEntries: [],
      ...(dropTimestamps ? { timestampVerificationData: { rfc3161Timestamps: [] } } : {}),
    },
  };
}

function signingTime(bundle: Bundle): Date | undefined {
  const entry = bundle.verificationMaterial?.tlogEntries.find((e) => e.inclusionPromise);
  return entry ? new Date(Number(entry.integratedTime) * 1000) : undefined;
}

export function fingerprint(key: KeyObject): string {
  return `sha256:${createHash("sha256")
    .update(key.export({ type: "spki", format: "der" }))
    .digest("hex")}`;
}

export function publicKeyFromPem(pem: string): KeyObject {
  return createPublicKey({ key: pem, format: "pem" });
}

/** Sigstore's errors carry a code and a message; say both in one line. */
function describeVerificationError(e: unknown): string {
  const err = e as { code?: unknown; message?: unknown };
  const message = typeof err.message === "string" ? err.message : String(e);
  switch (err.code) {
    case "SIGNATURE_ERROR":
      return "the signature does not verify with this key";
    case "TLOG_ERROR":
    case "TLOG_MISSING_INCLUSION_ERROR":
    case "TLOG_INCLUSION_PROOF_ERROR":
    case "TLOG_INCLUSION_PROMISE_ERROR":
      return `transparency log: ${message}`;
    case "CERTIFICATE_ERROR":
      return `certificate: ${message}`;
    default:
      return typeof err.code === "string" ? `${err.code}: ${message}` : message;
  }
}
