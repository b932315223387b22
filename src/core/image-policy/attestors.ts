// Attestors (image-verification design): who must have signed an image an allow rule admits. A rule lists
// attestor sets, all of which must be satisfied; a set needs `count` of its entries (all when omitted or 0),
// each met by a different signer; an entry is a static key, a keyless identity, or a nested list of sets that
// counts as one entry.
// Cryptography and registry lookups happen at the edge (src/verification/); this file holds the compiled
// form and the pure judgement of per-entry outcomes, with denials that say which signer was missing.
import type { SignerEvidence } from "../verification-results.ts";
import type { NotaryAttestor } from "./compile-notary.ts";
import type { SecretRef } from "./secret-refs.ts";

/** Who signed, as the results of a verification name them (src/core/verification-results.ts). */
export type { SignerEvidence };
export type { NotaryAttestor };

/** A public key as written in a policy, parsed at load time. */
export interface StaticKey {
  /** SPKI PEM, normalised. */
  pem: string;
  /** "sha256:<hex>" of the DER SubjectPublicKeyInfo: what audit records name. */
  fingerprint: string;
}

/** `k8s://NAMESPACE/SECRET[/KEY]`: read from the Kubernetes API when first needed. */
export type SecretKeyRef = SecretRef;

/** A string as a policy writes it: exact, `*` glob, or a regular expression. */
export interface IdentityMatcher {
  /** As written, for messages. */
  source: string;
  /** The one value it accepts, when it is neither a glob nor a regular expression. */
  exact?: string;
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

export type AttestorEntry = StaticKeyAttestor | KeylessAttestor | NotaryAttestor | NestedAttestor;
export type LeafAttestor = StaticKeyAttestor | KeylessAttestor | NotaryAttestor;
/** Sigstore's kinds (cosign signatures and Sigstore bundles), verified with a trust root. */
export type SigstoreAttestor = StaticKeyAttestor | KeylessAttestor;

export interface AttestorSet {
  /** "attestors[0]" */
  path: string;
  /** How many distinct entries must be satisfied (already resolved: 0/omitted → entries.length). */
  required: number;
  entries: AttestorEntry[];
}

/** A satisfied leaf names every distinct signer whose signature satisfies it (at least one). */
export type EntryOutcome = { ok: true; signers: SignerEvidence[] } | { ok: false; reason: string };

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

/**
 * Judges the sets from per-leaf outcomes (keyed by leaf path). Every set must be satisfied, each on its own: two
 * sets may be satisfied by the same signer. Within a set, the counted entries need distinct signers: one signer
 * counts for one entry only, and a nested entry's signers must all differ from those of the entries it is
 * counted with (its own sets are again judged each on its own).
 */
export function judgeAttestors(sets: readonly AttestorSet[], outcomes: ReadonlyMap<string, EntryOutcome>): AttestorJudgement {
  const failures: string[] = [];
  const evidence: SignerEvidence[] = [];
  for (const set of sets) {
    const budget = { steps: MAX_ASSIGNMENT_STEPS };
    let chosen: Chosen | undefined;
    satisfySet(set, outcomes, new Set(), budget, (c) => ((chosen = c), true));
    if (chosen) evidence.push(...chosen.evidence);
    else failures.push(explainSet(set, outcomes, budget.steps < 0));
  }
  return { satisfied: failures.length === 0, evidence: failures.length === 0 ? evidence : [], explanation: failures.join("; ") };
}

/** Signers assigned so far, with the evidence of the leaves they were counted for. */
interface Chosen {
  signers: ReadonlySet<string>;
  evidence: readonly SignerEvidence[];
}
const NO_SIGNERS: Chosen = { signers: new Set(), evidence: [] };
/**
 * Assigning signers to entries is a search (an entry may accept several signers, a signer several entries);
 * policies and signatures are few, but an image's signatures are chosen by whoever pushes them: the search is
 * bounded, and a search that runs out is a denial that says so.
 */
const MAX_ASSIGNMENT_STEPS = 10_000;

function union(a: Chosen, b: Chosen): Chosen {
  return { signers: new Set([...a.signers, ...b.signers]), evidence: [...a.evidence, ...b.evidence] };
}

/** Every set of `sets` satisfied, none with a signer in `blocked`; `then` gets the signers used (and may reject them). */
function satisfyAll(
  sets: readonly AttestorSet[],
  outcomes: ReadonlyMap<string, EntryOutcome>,
  blocked: ReadonlySet<string>,
  budget: { steps: number },
  then: (chosen: Chosen) => boolean,
): boolean {
  const from = (i: number, sofar: Chosen): boolean =>
    i === sets.length ? then(sofar) : satisfySet(sets[i]!, outcomes, blocked, budget, (c) => from(i + 1, union(sofar, c)));
  return from(0, NO_SIGNERS);
}

/** `set.required` of its entries, each with signers of its own and none in `blocked`; depth first, backtracking. */
function satisfySet(
  set: AttestorSet,
  outcomes: ReadonlyMap<string, EntryOutcome>,
  blocked: ReadonlySet<string>,
  budget: { steps: number },
  then: (chosen: Chosen) => boolean,
): boolean {
  const from = (j: number, counted: number, sofar: Chosen): boolean => {
    if (--budget.steps < 0) return false;
    if (counted >= set.required) return then(sofar);
    if (counted + set.entries.length - j < set.required) return false;
    const entry = set.entries[j]!;
    if (entry.type === "nested") {
      const taken = new Set([...blocked, ...sofar.signers]);
      if (satisfyAll(entry.sets, outcomes, taken, budget, (c) => from(j + 1, counted + 1, union(sofar, c)))) return true;
    } else {
      const outcome = outcomes.get(entry.path);
      for (const e of outcome?.ok ? outcome.signers : []) {
        if (blocked.has(e.signer) || sofar.signers.has(e.signer)) continue;
        if (from(j + 1, counted + 1, union(sofar, { signers: new Set([e.signer]), evidence: [e] }))) return true;
      }
    }
    return from(j + 1, counted, sofar);
  };
  return from(0, 0, NO_SIGNERS);
}

/** "attestors[0] needs 2 of 3: key a verified; key b: no signature by this key", and why shared signers fell short. */
function explainSet(set: AttestorSet, outcomes: ReadonlyMap<string, EntryOutcome>, outOfSteps: boolean): string {
  const parts: string[] = [];
  const signers = new Set<string>();
  let satisfied = 0;
  for (const entry of set.entries) {
    if (entry.type === "nested") {
      const nested = judgeAttestors(entry.sets, outcomes);
      if (nested.satisfied) {
        satisfied++;
        for (const e of nested.evidence) signers.add(e.signer);
        parts.push(`${entry.label} satisfied`);
      } else parts.push(`${entry.label}: [${nested.explanation}]`);
      continue;
    }
    const outcome = outcomes.get(entry.path) ?? { ok: false, reason: "not verified" };
    if (outcome.ok) {
      satisfied++;
      for (const e of outcome.signers) signers.add(e.signer);
      parts.push(`${entry.label} verified`);
    } else parts.push(`${entry.label}: ${outcome.reason}`);
  }
  const needs =
    set.required === set.entries.length
      ? set.entries.length === 1
        ? "needs its entry"
        : `needs all ${set.entries.length}`
      : `needs ${set.required} of ${set.entries.length}`;
  let shortfall = "";
  if (outOfSteps) shortfall = `; but no assignment of distinct signers to entries was found within ${MAX_ASSIGNMENT_STEPS} steps`;
  else if (satisfied >= set.required)
    shortfall = `; but one signer counts for one entry only, and these entries have ${signers.size} distinct signer${signers.size === 1 ? "" : "s"}`;
  return `${set.path} ${needs}: ${parts.join("; ")}${shortfall}`;
}
