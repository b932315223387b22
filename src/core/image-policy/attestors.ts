// Attestors (image-verification design): who must have signed an image an allow rule admits. A rule lists
// attestor sets, all of which must be satisfied; a set needs `count` of its entries (all when omitted or 0);
// an entry is a static key, a keyless identity, or a nested list of sets that counts as one entry.
// Cryptography and registry lookups happen at the edge (src/verification/); this file holds the compiled
// form and the pure judgement of per-entry outcomes, with denials that say which signer was missing.

/** A public key as written in a policy, parsed at load time. */
export interface StaticKey {
  /** SPKI PEM, normalised. */
  pem: string;
  /** "sha256:<hex>" of the DER SubjectPublicKeyInfo: what audit records name. */
  fingerprint: string;
}

/** `k8s://NAMESPACE/SECRET[/KEY]`: read from the Kubernetes API when first needed. */
export interface SecretKeyRef {
  namespace: string;
  secret: string;
  key: string;
}

/** A string as a policy writes it: exact, `*` glob, or a regular expression. */
export interface IdentityMatcher {
  /** As written, for messages. */
  source: string;
  test(value: string): boolean;
}

export interface StaticKeyAttestor {
  type: "staticKey";
  /** "attestors[0].entries[1]" */
  path: string;
  /** How messages name it: the policy's `name`, the keyRef, or "key sha256:ab12…". */
  label: string;
  key: StaticKey | { secretRef: SecretKeyRef };
  ignoreTlog: boolean;
  trustRoot: string;
}

export interface KeylessAttestor {
  type: "keyless";
  path: string;
  label: string;
  subject: IdentityMatcher;
  issuer: IdentityMatcher;
  /** Fulcio extensions that must hold these values: OID → value. */
  extensions: Array<{ name: string; oid: string; value: string }>;
  trustRoot: string;
  ignoreTlog: boolean;
}

export interface NestedAttestor {
  type: "nested";
  path: string;
  label: string;
  sets: AttestorSet[];
}

export type AttestorEntry = StaticKeyAttestor | KeylessAttestor | NestedAttestor;
export type LeafAttestor = StaticKeyAttestor | KeylessAttestor;

export interface AttestorSet {
  /** "attestors[0]" */
  path: string;
  /** How many distinct entries must be satisfied (already resolved: 0/omitted → entries.length). */
  required: number;
  entries: AttestorEntry[];
}

/** What a satisfied entry proves, for the audit log and the verified-images annotation. */
export interface SignerEvidence {
  /** The entry's path: "attestors[0].entries[1]". */
  entry: string;
  attestor: string;
  /** "key sha256:…" or "subject … issuer …". */
  signer: string;
  /** Where the signature was found: "cosign-signature" (tag .sig) or "sigstore-bundle" (referrer). */
  format: string;
  /** Transparency-log entry that proved the signing time, when there was one. */
  tlogIndex?: string;
  /** The trusted signing time (ISO 8601), from a log entry or a timestamp authority. */
  signedAt?: string;
}

export type EntryOutcome = { ok: true; evidence: SignerEvidence } | { ok: false; reason: string };

export interface AttestorJudgement {
  satisfied: boolean;
  /** Evidence of every satisfied leaf that counted. */
  evidence: SignerEvidence[];
  /** One line per unsatisfied set: "attestors[0] needs 2 of 3: key a verified; key b: no signature by this key". */
  explanation: string;
}

/** Every leaf of the sets, depth first (the edge verifies each once). */
export function leafAttestors(sets: readonly AttestorSet[]): LeafAttestor[] {
  const leaves: LeafAttestor[] = [];
  const walk = (list: readonly AttestorSet[]) => {
    for (const set of list)
      for (const entry of set.entries) {
        if (entry.type === "nested") walk(entry.sets);
        else leaves.push(entry);
      }
  };
  walk(sets);
  return leaves;
}

/** Judges the sets from per-leaf outcomes (keyed by leaf path). Every set must be satisfied. */
export function judgeAttestors(sets: readonly AttestorSet[], outcomes: ReadonlyMap<string, EntryOutcome>): AttestorJudgement {
  const failures: string[] = [];
  const evidence: SignerEvidence[] = [];
  for (const set of sets) {
    const judged = judgeSet(set, outcomes);
    if (judged.satisfied) evidence.push(...judged.evidence);
    else failures.push(judged.explanation);
  }
  return { satisfied: failures.length === 0, evidence: failures.length === 0 ? evidence : [], explanation: failures.join("; ") };
}

function judgeSet(set: AttestorSet, outcomes: ReadonlyMap<string, EntryOutcome>): AttestorJudgement {
  const parts: string[] = [];
  const evidence: SignerEvidence[] = [];
  let satisfied = 0;
  for (const entry of set.entries) {
    if (entry.type === "nested") {
      const nested = judgeAttestors(entry.sets, outcomes);
      if (nested.satisfied) {
        satisfied++;
        evidence.push(...nested.evidence);
        parts.push(`${entry.label} satisfied`);
      } else parts.push(`${entry.label}: [${nested.explanation}]`);
      continue;
    }
    const outcome = outcomes.get(entry.path) ?? { ok: false, reason: "not verified" };
    if (outcome.ok) {
      satisfied++;
      evidence.push(outcome.evidence);
      parts.push(`${entry.label} verified`);
    } else parts.push(`${entry.label}: ${outcome.reason}`);
  }
  const ok = satisfied >= set.required;
  const needs =
    set.required === set.entries.length
      ? set.entries.length === 1
        ? "needs its entry"
        : `needs all ${set.entries.length}`
      : `needs ${set.required} of ${set.entries.length}`;
  return { satisfied: ok, evidence: ok ? evidence : [], explanation: `${set.path} ${needs}: ${parts.join("; ")}` };
}
