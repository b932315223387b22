// What the edge hands back to image-policy evaluation after verifying signatures: one result per (policy, rule,
// image), by verificationKey, and the record of verified images that audit annotations and pods carry. Below the
// image policies that read the results and the planning that asks for them (image-verification.ts).
import { MAX_LISTED_VIOLATIONS } from "./decision.ts";

/** What a satisfied entry proves, for the audit log and the verified-images annotation. */
export interface SignerEvidence {
  /** The entry's path: "attestors[0].entries[1]". */
  entry: string;
  attestor: string;
  /** The signing identity: "key sha256:<fingerprint>" or "subject … issuer …". Two signatures with the same one are one signer. */
  signer: string;
  /** Where the signature was found: "cosign-signature" (tag .sig) or "sigstore-bundle" (referrer). */
  format: string;
  /** Transparency-log entry that proved the signing time, when there was one. */
  tlogIndex?: string;
  /** The trusted signing time (ISO 8601), from a log entry or a timestamp authority. */
  signedAt?: string;
  /** Checks a Notary Project signature failed that its entry's level only logs ("authenticity: …" under audit). */
  logged?: string[];
  /** The signature artifact that satisfied the entry, for Notary Project signatures: "referrer registry/repo@sha256:…". */
  envelope?: string;
  /** The trusted identity a Notary Project signer matched: "x509.subject: C=US, ST=WA, O=Acme", or "*". */
  identity?: string;
}

/** Per attestation check of a rule: the statements that verified for its attestors, or why none did. */
export interface VerifiedAttestation {
  index: number;
  predicateType: string;
  /** Statements signed by at least one of the check's attestor entries; `signers`: every entry it satisfies, and by whom. */
  statements: Array<{ statement: Record<string, unknown>; signers: SignerEvidence[] }>;
  /** Why other statements of this type did not count (shortened). */
  failures: string[];
}

export type ImageVerification =
  | { status: "verified"; digest: string; evidence: SignerEvidence[]; attestations?: VerifiedAttestation[] }
  /** The signatures, or their absence, say no (or the digest could not be known: the registry's answer). */
  | { status: "denied"; digest?: string; reason: string }
  /** The registry did not answer: the failure policy decides. */
  | { status: "unavailable"; digest?: string; reason: string; registry: string };

/** Verification results of one admission, by verificationKey. */
export type VerificationResults = ReadonlyMap<string, ImageVerification>;

export function verificationKey(policy: string, rule: number, image: string): string {
  return `${policy}\u0000${rule}\u0000${image}`;
}

/**
 * The audit annotation and object annotation value: image → digest and who signed it. Informational only.
 * At most MAX_LISTED_VIOLATIONS images are listed, then "…": "N more", so a huge pod cannot make a huge record.
 */
export function verifiedImagesRecord(results: VerificationResults): Record<string, VerifiedImageRecord | string> {
  const record: Record<string, VerifiedImageRecord> = {};
  let listed = 0;
  let more = 0;
  for (const [key, result] of results) {
    if (result.status !== "verified") continue;
    const image = key.slice(key.lastIndexOf("\u0000") + 1);
    const before = record[image];
    if (!before && listed >= MAX_LISTED_VIOLATIONS) {
      more++;
      continue;
    }
    if (!before) listed++;
    record[image] = before ? merged(before, entryOf(result)) : entryOf(result);
  }
  return more > 0 ? { ...record, "…": `${more} more` } : record;
}

/**
 * verifiedImagesRecord as JSON (the audit annotation and the object annotation), or undefined when nothing was
 * verified. The same cached results give the same text for as long as they are cached: made once, for one verified
 * image (most admissions) as for several (a pod with sidecars).
 */
export function verifiedImagesText(results: VerificationResults): string | undefined {
  let only: [key: string, result: Extract<ImageVerification, { status: "verified" }>] | undefined;
  for (const [key, result] of results) {
    if (result.status !== "verified") continue;
    // Two verified results (two images, or one image two policies verified): the record merges them.
    if (only) return severalImagesText(results);
    only = [key, result];
  }
  if (!only) return undefined;
  const image = only[0].slice(only[0].lastIndexOf("\u0000") + 1);
  const entry = entryOf(only[1]);
  let texts = singleTexts.get(entry);
  if (!texts) singleTexts.set(entry, (texts = new Map()));
  let text = texts.get(image);
  if (text === undefined) {
    text = JSON.stringify({ [image]: entry });
    // Bounded: an image admitted under many names (tags of one digest) makes a text per name.
    if (texts.size >= 16) texts.clear();
    texts.set(image, text);
  }
  return text;
}

/** The JSON of a one-image record, per kept entry and image name. */
const singleTexts = new WeakMap<VerifiedImageRecord, Map<string, string>>();

/**
 * The JSON of a record of several verified results, by which results (an id per result object: a cache hit hands
 * out the same one) under which images, in order. Bounded: a result that left the verifier's cache leaves an entry
 * nobody asks for until the map is emptied.
 */
const severalTexts = new Map<string, string>();
const resultIds = new WeakMap<ImageVerification, number>();
let nextResultId = 1;

function severalImagesText(results: VerificationResults): string {
  let key = "";
  for (const [resultKey, result] of results) {
    if (result.status !== "verified") continue;
    let id = resultIds.get(result);
    if (id === undefined) resultIds.set(result, (id = nextResultId++));
    key += `${id}\u0000${resultKey.slice(resultKey.lastIndexOf("\u0000") + 1)}\u0000`;
  }
  let text = severalTexts.get(key);
  if (text === undefined) {
    text = JSON.stringify(verifiedImagesRecord(results));
    if (severalTexts.size >= 1_000) severalTexts.clear();
    severalTexts.set(key, text);
  }
  return text;
}

// A cache hit hands out the same result object on every admission of an image: its entry is worked out once, and
// shared (read only) until another result for the same image is merged into a copy.
const entries = new WeakMap<ImageVerification, VerifiedImageRecord>();

function entryOf(result: Extract<ImageVerification, { status: "verified" }>): VerifiedImageRecord {
  let entry = entries.get(result);
  if (entry) return entry;
  entry = { digest: result.digest, signers: [...new Set(result.evidence.map(describeSigner))] };
  for (const a of result.attestations ?? []) {
    const signers = a.statements.flatMap((s) => s.signers.map(describeSigner));
    if (signers.length === 0) continue;
    entry.attestations = { ...entry.attestations, [a.predicateType]: [...new Set([...(entry.attestations?.[a.predicateType] ?? []), ...signers])] };
  }
  entries.set(result, entry);
  return entry;
}

/** The image's entry with another result's signers added (two policies verified it); a new object, never a shared one. */
function merged(before: VerifiedImageRecord, more: VerifiedImageRecord): VerifiedImageRecord {
  const out: VerifiedImageRecord = { digest: before.digest, signers: [...new Set([...before.signers, ...more.signers])] };
  const types = new Set([...Object.keys(before.attestations ?? {}), ...Object.keys(more.attestations ?? {})]);
  for (const type of types)
    out.attestations = { ...out.attestations, [type]: [...new Set([...(before.attestations?.[type] ?? []), ...(more.attestations?.[type] ?? [])])] };
  return out;
}

/** Per verified image: its digest, who signed it, and who signed the attestations its rule asked for, by predicate type. */
export interface VerifiedImageRecord {
  digest: string;
  signers: string[];
  attestations?: Record<string, string[]>;
}

function describeSigner(e: SignerEvidence): string {
  const when = e.tlogIndex !== undefined ? ` (log index ${e.tlogIndex})` : e.signedAt ? ` (signed ${e.signedAt})` : "";
  // A Notary Project signature: which entry, certificate (subject and fingerprint), trusted identity and envelope satisfied it.
  if (e.envelope) {
    const identity = e.identity ? `, identity ${JSON.stringify(e.identity)}` : "";
    return `${e.attestor}: ${e.signer}${when}${identity}, ${e.format === "notation-cose" ? "COSE" : "JWS"} envelope of ${e.envelope}`;
  }
  return `${e.signer}${when}`;
}
