// Whether one Notary Project signature satisfies one `notary` attestor entry for one manifest, in the order and with
// the levels of Notation's trust policy: integrity (the envelope, its signature and the chain's profile) and the
// payload naming the manifest are always enforced; authenticity (the chain ends in the entry's trust store, the
// leaf's subject is a trusted identity), the signature's expiry and its authentic time (an RFC 3161 countersignature,
// the signing authority's authentic signing time, or else every certificate valid now) are enforced or only logged,
// as the entry's level says. Revocation (OCSP, CRL: notation-revocation.ts) is checked only when the entry asks for it
// (Notation checks it under strict by default; docs/notation.md says why Imprimatur does not), and only of a chain
// that ends in the entry's trust store: the responders a certificate names are contacted only when a trusted CA
// issued it.
import { createHash } from "node:crypto";
import { hasErrorCode } from "../errors/imprimatur-error.ts";
import { readCoseEnvelope } from "./cose-envelope.ts";
import { readJwsEnvelope } from "./jws-envelope.ts";
import {
  checkChainProfile,
  checkTrusted,
  checkValidity,
  describeSubject,
  NotationCertificateError,
  identityMatches,
  readChain,
  type ReadChain,
} from "./notation-certificates.ts";
import { formatTrustedIdentity, type TrustedIdentity } from "../core/image-policy/notary-identities.ts";
import { COSE_ENVELOPE_MEDIA_TYPE, JWS_ENVELOPE_MEDIA_TYPE, type VerifiedEnvelope } from "./notation-envelope.ts";
import { checkTarget, readPayload, type TargetManifest } from "./notation-payload.ts";
import { checkChainRevocation, type ChainRevocation, type RevocationFetcher } from "./notation-revocation.ts";
import { verifyTimestamp } from "./notation-timestamp.ts";

/** Notation's verification levels but `skip` (an entry that skips verification verifies nothing: not offered). */
export type NotationLevel = "strict" | "permissive" | "audit";

/** What one `notary` attestor entry trusts, as compiled from a policy. */
export interface NotationTrust {
  /** X.509 roots by trust store type: a notary.x509 chain must end in `ca`, a signing authority's in `signingAuthority`. */
  ca: readonly Uint8Array[];
  signingAuthority: readonly Uint8Array[];
  /** Roots of the time-stamping authorities whose countersignatures count (none: timestamps are not verified). */
  tsa: readonly Uint8Array[];
  /** How messages name the stores: "the entry's certs". */
  storeName: string;
  /** Subjects the leaf must match one of; "*": any leaf that chains to the store. */
  identities: readonly TrustedIdentity[] | "*";
  level: NotationLevel;
  /** always: a countersignature is verified whenever there is a tsa store; afterCertExpiry: only once a certificate expired. */
  verifyTimestamp: "always" | "afterCertExpiry";
  /** Annotations the signed descriptor must carry with these values. */
  requiredAnnotations?: Readonly<Record<string, string>>;
  /** Whether a revoked certificate, or one whose status cannot be told, fails the signature (enforce), is logged, or is not checked (skip, the default). */
  revocation?: RevocationMode;
}

export type RevocationMode = "skip" | "log" | "enforce";

export type NotationOutcome =
  | {
      ok: true;
      /** The signer, as N-of-M counting tells signers apart: the leaf's subject and fingerprint. */
      signer: string;
      envelope: VerifiedEnvelope;
      /** The authentic signing time, when one was verified (a countersignature or a signing authority's). */
      signedAt?: Date;
      /** Checks that failed but that the level only logs ("authenticity: …" under audit). */
      logged: string[];
      /** The trusted identity the leaf matched, as a policy writes it ("x509.subject: C=US, ST=WA, O=Acme"), or "*". */
      identity?: string;
    }
  | { ok: false; reason: string };

type Check = "authenticity" | "expiry" | "authenticTimestamp" | "revocation";

/** Which checks a level enforces (the rest it logs); integrity and the payload are enforced at every level. */
const ENFORCED: Record<NotationLevel, ReadonlySet<Check>> = {
  strict: new Set(["authenticity", "expiry", "authenticTimestamp"]),
  permissive: new Set(["authenticity"]),
  audit: new Set(),
};

/** Verifies one envelope (its media type as the signature manifest's layer names it) against `manifest`. */
export async function verifyNotationSignature(
  envelopeBytes: Uint8Array,
  mediaType: string,
  manifest: TargetManifest,
  trust: NotationTrust,
  now: Date = new Date(),
  revocation?: RevocationFetcher,
): Promise<NotationOutcome> {
  let envelope: VerifiedEnvelope;
  let chain: ReadChain;
  try {
    if (mediaType === JWS_ENVELOPE_MEDIA_TYPE) envelope = await readJwsEnvelope(envelopeBytes);
    else if (mediaType === COSE_ENVELOPE_MEDIA_TYPE) envelope = readCoseEnvelope(envelopeBytes);
    else return { ok: false, reason: `signature envelope of media type ${mediaType}: neither JWS nor COSE` };
    chain = readChain(envelope.certificateChain);
    checkChainProfile(chain, "codeSigning");
    checkTarget(readPayload(envelope.payload), manifest, trust.requiredAnnotations);
  } catch (e) {
    return { ok: false, reason: reasonOf(e) };
  }

  const logged: string[] = [];
  const failed = (check: Check, reason: string): NotationOutcome | undefined => {
    const enforced = check === "revocation" ? trust.revocation === "enforce" : ENFORCED[trust.level].has(check);
    if (enforced) return { ok: false, reason };
    logged.push(`${check}: ${reason}`);
    return undefined;
  };

  const leaf = chain.parsed[0]!;
  const subject = describeSubject(leaf);
  let trusted = true;
  let identity: string | undefined;
  try {
    checkTrusted(chain, envelope.signingScheme === "notary.x509" ? trust.ca : trust.signingAuthority, trustStoreName(trust, envelope));
    const matched = trust.identities === "*" ? "*" : trust.identities.find((candidate) => identityMatches(candidate, leaf));
    if (matched === undefined) throw new NotationCertificateError("identity", `the signing certificate's subject ${subject} is none of the trusted identities`);
    identity = matched === "*" ? "*" : formatTrustedIdentity(matched);
  } catch (e) {
    trusted = false;
    const refusal = failed("authenticity", reasonOf(e));
    if (refusal) return refusal;
  }

  if (envelope.expiry && now.getTime() >= envelope.expiry.getTime()) {
    const refusal = failed("expiry", `the signature expired at ${envelope.expiry.toISOString()}`);
    if (refusal) return refusal;
  }

  let signedAt: Date | undefined;
  try {
    signedAt = authenticTime(envelope, chain, trust, now);
  } catch (e) {
    const refusal = failed("authenticTimestamp", reasonOf(e));
    if (refusal) return refusal;
  }

  const mode = trust.revocation ?? "skip";
  if (mode !== "skip") {
    // A chain the store does not vouch for names responders nobody trusts: they are not contacted.
    const status: ChainRevocation = !trusted
      ? { status: "unknown", reason: "not checked: the chain does not end in the entry's trust store" }
      : revocation
        ? await checkChainRevocation(chain, revocation, now, envelope.signingScheme === "notary.x509.signingAuthority" ? signedAt : undefined)
        : { status: "unknown", reason: "no revocation checker is configured here" };
    if (status.status !== "good") {
      const refusal = failed("revocation", status.reason);
      if (refusal) return refusal;
    }
  }

  return {
    ok: true,
    signer: `x509 ${subject} (${fingerprint(envelope.certificateChain[0]!)})`,
    envelope,
    ...(signedAt ? { signedAt } : {}),
    logged,
    ...(identity ? { identity } : {}),
  };
}

/**
 * The time the chain is judged at, and that it was valid then: a signing authority's authentic signing time; a
 * countersignature's range, when the entry has TSA roots and verifies timestamps now; else the present.
 */
function authenticTime(envelope: VerifiedEnvelope, chain: ReadChain, trust: NotationTrust, now: Date): Date | undefined {
  if (envelope.signingScheme === "notary.x509.signingAuthority") {
    const at = envelope.authenticSigningTime!;
    checkValidity(chain, at, at, `the authentic signing time ${at.toISOString()}`);
    return at;
  }
  const someExpired = chain.node.some((cert) => new Date(cert.validTo).getTime() < now.getTime());
  const verifyCountersignature = trust.tsa.length > 0 && (trust.verifyTimestamp === "always" || someExpired);
  if (!verifyCountersignature) {
    checkValidity(chain, now, now, `the present (${now.toISOString()}), and no timestamp is verified`);
    return undefined;
  }
  if (!envelope.timestampToken)
    throw new NotationCertificateError("validity", "the signature has no RFC 3161 timestamp, and the entry verifies timestamps (tsaCerts)");
  const stamp = verifyTimestamp(envelope.timestampToken, envelope.signature, trust.tsa, `${trust.storeName} (tsa)`);
  checkValidity(chain, stamp.earliest, stamp.latest, `the timestamp's ${stamp.genTime.toISOString()}`);
  return stamp.genTime;
}

function trustStoreName(trust: NotationTrust, envelope: VerifiedEnvelope): string {
  return `${trust.storeName} (${envelope.signingScheme === "notary.x509" ? "ca" : "signingAuthority"})`;
}

function fingerprint(der: Uint8Array): string {
  return `sha256:${createHash("sha256").update(der).digest("hex")}`;
}

function reasonOf(e: unknown): string {
  if (hasErrorCode(e)) return e.message;
  return `cannot verify: ${(e as Error)?.message ?? String(e)}`;
}
