// Signature verification for admission: for one image digest and one allow rule's attestors, find the
// signatures (with the pod's credentials), verify each attestor entry, and judge the sets. Results are cached
// by digest + policy rule + policy generation + the credentials offered + the keys read from Secrets, so a
// result is never reused for another policy, after a reload, for a pod that could not have read the signatures,
// or once a Secret's key changed or went; denials are cached briefly, registry outages not at all. Concurrent
// admissions of the same image share one verification.
import { createHash, type KeyObject } from "node:crypto";
import { LRUCache } from "lru-cache";
import {
  judgeAttestors,
  leafAttestors,
  type AttestorSet,
  type EntryOutcome,
  type LeafAttestor,
  type NotaryAttestor,
  type SigstoreAttestor,
  type StaticKeyAttestor,
} from "../core/image-policy/attestors.ts";
import { readStoreCertificates } from "../core/image-policy/compile-notary.ts";
import type { SecretRef } from "../core/image-policy/secret-refs.ts";
import { fullName, repositoryName, type ImageReference } from "../core/image-reference.ts";
import type { TrustRoot } from "../core/trust-root/trust-root-kind.ts";
import { credentialIdentity } from "../credentials/credential-identity.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { withDeadline } from "../registry/deadline.ts";
import { InFlight } from "../registry/in-flight.ts";
import { DEFAULT_MAX_BYTES_PER_IMAGE, DownloadBudget } from "../registry/download-budget.ts";
import { hasErrorCode } from "../errors/imprimatur-error.ts";
import type { RegistryError } from "../registry/registry-error.ts";
import { discoverSignatures, MAX_SIGNATURES, type Discovery, type SignatureLocation } from "./signature-discovery.ts";
import { trustRootNamed } from "./trust-roots.ts";
import { judgeNotaryEntry, type NotaryStores } from "./verify-notary-entry.ts";
import type { RevocationFetcher } from "../notation/notation-revocation.ts";
import { attestationBinding, imageBinding, inTotoStatement, publicKeyFromPem, verifyItem, type EntryContext, type ItemOutcome } from "./verify-entry.ts";
import type { SignedItem } from "./signed-item.ts";
import type { SignerEvidence } from "../core/image-policy/attestors.ts";
import type { VerifiedAttestation } from "../core/verification-results.ts";

export type VerificationResult =
  | { status: "verified"; evidence: SignerEvidence[]; attestations?: VerifiedAttestation[] }
  /** The signatures, or their absence, say no; `code` when a limit decided it ("download-limit"). */
  | { status: "denied"; reason: string; code?: "download-limit" }
  /** The registry did not answer: the failure policy decides. */
  | { status: "unavailable"; reason: string; registry: string };

export interface VerificationRequest {
  /** With a digest. */
  image: ImageReference & { digest: string };
  policy: string;
  rule: number;
  /** Every set must be satisfied by image signatures; empty: no signature is required (attestations only). */
  attestors: readonly AttestorSet[];
  /** In-toto attestations to find and verify, each for its own attestors. */
  attestations?: ReadonlyArray<{ index: number; predicateType: string; attestors: readonly AttestorSet[] }>;
  signatureRepository?: { registry: string; repository: string };
  /** The pod's credentials (its pull secrets, then the server's). */
  lookup: CredentialLookup;
}

/**
 * How a verifier shares its work with other processes (serve --workers: src/workers/shared-verifications.ts): on a
 * miss of its own cache it claims the key, and either gets a result another process verified or verifies it itself
 * and settles the claim, so that one image is verified once across them.
 */
export interface SharedVerifications {
  claim(key: string, deadline: number): Promise<Claim>;
}

/** What a verifier is told when it claims a key it does not have. */
export type Claim =
  /** Another process's result (or one kept from it), and how long it may still be kept (undefined: not at all). */
  | SharedResult
  /** Verify it here, then settle: with the result and how long it may be kept (undefined: not kept), or undefined when giving up. */
  | { verify: (result: VerificationResult | undefined, keepMs?: number) => void };

export type SharedResult = { result: VerificationResult; keepMs: number | undefined };

export interface ImageVerifierOptions {
  client: Parameters<typeof discoverSignatures>[0];
  /** The TrustRoots of the current policy set. */
  trustRoots: () => ReadonlyMap<string, TrustRoot>;
  /** Fetches OCSP responses and CRLs for notary entries that check revocation; absent: such entries cannot tell. */
  revocation?: RevocationFetcher;
  /** Reads a `k8s://` Secret's key (a PEM public key or certificates); absent when the server has no API access. */
  secretKeys?: (ref: SecretRef, signal: AbortSignal) => Promise<string>;
  verifiedTtlMs?: number;
  deniedTtlMs?: number;
  maxEntries?: number;
  /** Bytes read from registries per verification (manifests, referrer lists, signatures, attestations). Default 16 MiB. */
  maxBytesPerImage?: number;
  /** Signatures, and separately attestations, read per layout (cosign tag, referrers). Default 32. */
  maxArtifactsPerImage?: number;
  /** The clock (ms) of the result cache and of the keys read from Secrets; performance.now by default. */
  now?: () => number;
  /** Observability: each verification that ran (not cache hits), with its duration. */
  onVerification?: (request: VerificationRequest, result: VerificationResult, seconds: number) => void;
  /** Asked on a miss of this cache before verifying: other processes' results (serve --workers). */
  shared?: SharedVerifications;
  /** Whose verifier this is (a cluster's name): results shared with other processes are named with it. */
  scope?: string;
}

export class ImageVerifier {
  private readonly opts: ImageVerifierOptions;
  private readonly cache: LRUCache<string, VerificationResult>;
  private readonly inFlight = new InFlight<VerificationResult>();
  /**
   * Texts read from Secrets (keys, certificates), kept briefly: every verification asks for its material first, so a
   * deleted or replaced Secret counts within this time, cached results included (their key names what was read).
   */
  private readonly secretTexts: InFlight<string>;
  private generation = 0;
  /** Verifications that ran (cache misses not joined to one in flight); hits served from the cache; results another process verified. */
  verifications = 0;
  hits = 0;
  sharedResults = 0;

  constructor(options: ImageVerifierOptions) {
    this.opts = options;
    const now = options.now ?? (() => performance.now());
    this.secretTexts = new InFlight({ ttlMs: SECRET_TTL_MS, now });
    this.cache = new LRUCache({ max: options.maxEntries ?? 10_000, ttl: options.verifiedTtlMs ?? 300_000, perf: { now }, ttlResolution: 0 });
  }

  /**
   * Policies or trust roots changed: no earlier result may be used. `generation`: the policy set's number as the
   * primary of serve --workers gave it, so that every worker names one set's results alike; else one more than before.
   */
  clear(generation?: number): void {
    this.generation = generation ?? this.generation + 1;
    this.cache.clear();
  }

  /**
   * The cached result of every request, when each has one and every key they name is at hand (written in the
   * policy, or read from its Secret within SECRET_KEY_TTL_MS): no timer, no await. A repeat admission of verified
   * images is answered from here; when any request is not (a miss, a key to read, a key that cannot be read), none
   * is, and verify() answers each.
   */
  peekAll(requests: readonly VerificationRequest[]): VerificationResult[] | undefined {
    const found: VerificationResult[] = [];
    for (const request of requests) {
      const { materials, unread } = this.materialsAtHand(leavesOf(request));
      if (unread.size > 0) return undefined;
      const { read, unreadable } = splitMaterials(materials);
      if (unreadable.length > 0) return undefined;
      const cached = this.cache.get(this.cacheKey(this.generation, request, read));
      if (!cached) return undefined;
      found.push(cached);
    }
    this.hits += found.length;
    return found;
  }

  /** `askedUnder`: the generation the request was made under, when that was before this call (DeferredImageVerifier). */
  async verify(request: VerificationRequest, deadline: number, askedUnder?: number): Promise<VerificationResult> {
    // The policy generation this verification was asked under, before anything is awaited (a reload may follow).
    const generation = askedUnder ?? this.generation;
    const at = request.signatureRepository ?? request.image;
    const asked = this.materialsOf(leavesOf(request), deadline);
    const materials = asked instanceof Promise ? await asked : asked;
    // A key that cannot be read (its Secret deleted, no API access) leaves the rule unable to verify: it denies
    // whatever the other entries say, naming the key, until the key can be read again.
    const { read, unreadable } = splitMaterials(materials);
    if (unreadable.length > 0) {
      const denied: VerificationResult = { status: "denied", reason: `${unreadable.join("; ")}: this rule denies every image it matches until it can be read` };
      this.opts.onVerification?.(request, denied, 0);
      return denied;
    }
    const key = this.cacheKey(generation, request, read);
    const cached = this.cache.get(key);
    if (cached) {
      this.hits++;
      return cached;
    }
    const run = async (): Promise<VerificationResult> => {
      const claim = await this.opts.shared?.claim(key, deadline);
      if (claim && "result" in claim) {
        this.sharedResults++;
        // No longer than the process that verified it keeps it: a result is not kept afresh by each one it reaches.
        if (claim.keepMs !== undefined) this.keep(generation, key, claim.result, claim.keepMs);
        return claim.result;
      }
      this.verifications++;
      const started = performance.now();
      let result: VerificationResult;
      try {
        result = await this.run(request, deadline, read);
      } catch (e) {
        claim?.verify(undefined);
        throw e;
      }
      this.opts.onVerification?.(request, result, (performance.now() - started) / 1000);
      // Kept here first: `claim?.verify(...)` would skip its arguments, and so the keeping, without a claim.
      const keptMs = this.keep(generation, key, result);
      claim?.verify(result, keptMs);
      return result;
    };
    try {
      return await withDeadline(this.inFlight.run(key, run), deadline);
    } catch (e) {
      return { status: "unavailable", reason: `signature verification did not finish: ${(e as Error).message}`, registry: at.registry };
    }
  }

  private async run(request: VerificationRequest, deadline: number, materials: ReadonlyMap<LeafAttestor, Material>): Promise<VerificationResult> {
    const signal = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    const image: SignatureLocation = { registry: request.image.registry, repository: request.image.repository, digest: request.image.digest };
    const at: SignatureLocation = request.signatureRepository ? { ...request.signatureRepository, digest: request.image.digest } : image;
    const checks = request.attestations ?? [];
    const budget = new DownloadBudget(this.opts.maxBytesPerImage ?? DEFAULT_MAX_BYTES_PER_IMAGE);
    const leaves = leafAttestors(request.attestors);
    const wanted = {
      predicateTypes: checks.map((c) => c.predicateType),
      maxArtifacts: this.opts.maxArtifactsPerImage ?? MAX_SIGNATURES,
      notation: leaves.some((leaf) => leaf.type === "notary"),
      sigstore: leaves.some((leaf) => leaf.type !== "notary"),
    };
    const options = { signal, credentials: request.lookup, budget };
    // A Notary Project signature names the manifest's media type and size as well as its digest: read beside the
    // signatures (not after them) when a notary entry may need it, and its failure judged only if one does.
    const manifestRead = wanted.notation
      ? this.opts.client
          .getManifest({ registry: image.registry, repository: image.repository, digest: image.digest }, options)
          .then((m) => ({ digest: image.digest, mediaType: m.mediaType, size: m.body.length }))
      : undefined;
    manifestRead?.catch(() => {});
    const discovery = await discoverSignatures(this.opts.client, image, at, options, wanted);
    const trustRoots = this.opts.trustRoots();
    const contextOf = (leaf: SigstoreAttestor, binding: (item: SignedItem) => string | undefined): EntryContext => {
      const material = materials.get(leaf);
      return { binding, trustRoot: trustRootNamed(trustRoots, leaf.trustRoot)?.sigstore, ...(material && "key" in material ? { key: material.key } : {}) };
    };
    let manifest: Promise<{ digest: string; mediaType: string; size: number }> | undefined;
    const manifestOf = () =>
      (manifest ??= manifestRead!.catch((e: unknown) => {
        // No answer is an outage (the failure policy decides), as for the signatures' own lookups.
        if (hasErrorCode(e, "unreachable", "timeout", "unavailable")) discovery.unanswered.push(e as RegistryError);
        throw e;
      }));
    const outcomes = new Map<string, EntryOutcome>();
    for (const leaf of leaves) {
      if (leaf.type === "notary") {
        const material = materials.get(leaf);
        // A TrustRoot's Notation stores, or those read from Secrets; else the entry's own (verify-notary-entry.ts).
        const stores =
          leaf.trustRoot !== undefined ? notationStoresOf(trustRoots, leaf.trustRoot) : material && "stores" in material ? material.stores : undefined;
        outcomes.set(leaf.path, await judgeNotaryEntry(leaf, discovery, manifestOf, stores, this.opts.revocation));
      } else outcomes.set(leaf.path, judgeLeaf(leaf, discovery, contextOf(leaf, imageBinding(request.image.digest))));
    }
    const judgement = judgeAttestors(request.attestors, outcomes);
    if (judgement.satisfied) {
      if (checks.length === 0) return { status: "verified", evidence: judgement.evidence };
      const attestations = checks.map((check) => verifyAttestations(check, discovery, request.image.digest, contextOf));
      if (discovery.limitHit && attestations.some((a) => a.statements.length === 0))
        return { status: "denied", code: "download-limit", reason: `not every attestation could be read: ${discovery.limitHit.message}` };
      // Statements not read could fail a condition, a check over every statement or `validate`: judging the ones
      // that were read would admit on part of the evidence. Any lookup left unanswered is an outage.
      if (discovery.unanswered.length > 0)
        return {
          status: "unavailable",
          registry: at.registry,
          reason: `the registry did not answer every attestation lookup (${discovery.unanswered[0]!.message})`,
        };
      return { status: "verified", evidence: judgement.evidence, attestations };
    }
    // A spent budget is the registry's answer (too much to read), not an outage: denied under any failure policy.
    if (discovery.limitHit)
      return { status: "denied", code: "download-limit", reason: `not every signature could be read: ${discovery.limitHit.message}; ${judgement.explanation}` };
    const problems =
      discovery.problems.length > 0 ? ` (unreadable: ${discovery.problems.slice(0, 3).join("; ")}${discovery.problems.length > 3 ? "; …" : ""})` : "";
    if (discovery.unanswered.length > 0)
      return {
        status: "unavailable",
        registry: at.registry,
        reason: `the registry did not answer every signature lookup (${discovery.unanswered[0]!.message}); ${judgement.explanation}${problems}`,
      };
    // Nothing read and something unreadable (refused, unauthorized, malformed): nothing can be said to be missing.
    const lead = discovery.problems.length > 0 ? "no signature could be read" : "no signatures found";
    const none = discovery.items.length === 0 && discovery.notation.length === 0 ? `${lead} (looked for ${discovery.looked.join(" and ")}); ` : "";
    return { status: "denied", reason: `${none}${judgement.explanation}${problems}` };
  }

  /**
   * Caches a result as long as its kind is kept (an outage: not at all), unless the policies changed meanwhile;
   * returns how long, for others to keep it as long.
   */
  private keep(generation: number, key: string, result: VerificationResult, atMostMs = Infinity): number | undefined {
    if (result.status === "unavailable") return undefined;
    const ttl = Math.min(atMostMs, result.status === "denied" ? (this.opts.deniedTtlMs ?? 10_000) : (this.opts.verifiedTtlMs ?? 300_000));
    if (generation !== this.generation) return undefined;
    this.cache.set(key, result, { ttl });
    return ttl;
  }

  /**
   * What a result is cached under: by digest + policy rule + policy generation + the credentials offered + the keys
   * read from Secrets.
   */
  private cacheKey(generation: number, request: VerificationRequest, read: ReadonlyMap<LeafAttestor, Material>): string {
    const at = request.signatureRepository ?? request.image;
    // By digest, not tag: two tags of one digest are one image to verify (a scan of many pods of few images
    // verifies each image once). Without a digest (never asked of the verifier in practice), the name as given.
    const image = request.image.digest ? `${repositoryName(request.image)}@${request.image.digest}` : fullName(request.image);
    let key = `${generation}\u0000${this.opts.scope ?? ""}\u0000${request.policy}\u0000${request.rule}\u0000${image}\u0000${at.registry}/${at.repository}\u0000${credentialIdentity(at, request.lookup)}`;
    // The keys and certificates, as a Secret's may change without a reload: a result is never reused for other ones.
    for (const k of read.values()) key += `\u0000${k.id}`;
    return key;
  }

  /**
   * What each entry takes from the policy or from Kubernetes Secrets: a static key entry's key, a notary entry's
   * certificate stores when any is in a Secret (with an id of what was read). By entry, not by path: an attestation's
   * own attestors have the same paths as the rule's ("attestors[0].entries[0]"), and one entry's key must never stand
   * in for another's.
   */
  private materialsOf(leaves: readonly LeafAttestor[], deadline: number): Map<LeafAttestor, MaterialOf> | Promise<Map<LeafAttestor, MaterialOf>> {
    const { materials, unread } = this.materialsAtHand(leaves);
    // Material written in the policy, or read within the TTL, is at hand: no timer, no await (this runs on every
    // admission that peek() did not answer).
    if (unread.size === 0) return materials;
    const reader = this.opts.secretKeys;
    if (!reader) {
      for (const [leaf, refs] of unread) {
        const noApi = `k8s://${refs[0]!.namespace}/${refs[0]!.secret} cannot be read: the server has no Kubernetes API access`;
        materials.set(leaf, { error: leaf.type === "staticKey" ? noApi : `${leaf.label}: ${noApi}` });
      }
      return materials;
    }
    const signal = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    const refs = new Map([...unread.values()].flat().map((ref) => [secretRefName(ref), ref]));
    const texts = new Map<string, { text: string } | { error: string }>();
    return Promise.all(
      [...refs].map(async ([name, ref]) => {
        try {
          texts.set(name, { text: await this.secretTexts.run(name, () => reader(ref, signal), signal) });
        } catch (e) {
          texts.set(name, { error: (e as Error).message });
        }
      }),
    ).then(() => {
      for (const [leaf, refs] of unread) {
        const failed = refs.map((ref) => [ref, texts.get(secretRefName(ref))!] as const).find(([, read]) => "error" in read);
        if (failed) {
          const what = leaf.type === "staticKey" ? "key" : `${leaf.label}: certificates`;
          materials.set(leaf, { error: `${what} k8s://${secretRefName(failed[0])}: ${(failed[1] as { error: string }).error}` });
        } else
          materials.set(
            leaf,
            materialOf(leaf, (ref) => (texts.get(secretRefName(ref)) as { text: string }).text),
          );
      }
      return materials;
    });
  }

  /** The material at hand (written in the policy, or kept from a Secret read), and per entry the Secrets still to read. */
  private materialsAtHand(leaves: readonly LeafAttestor[]): {
    materials: Map<LeafAttestor, MaterialOf>;
    unread: Map<StaticKeyAttestor | NotaryAttestor, SecretRef[]>;
  } {
    const materials = new Map<LeafAttestor, MaterialOf>();
    const unread = new Map<StaticKeyAttestor | NotaryAttestor, SecretRef[]>();
    for (const leaf of leaves) {
      if (leaf.type !== "staticKey" && leaf.type !== "notary") continue;
      const refs = secretRefsOf(leaf);
      if (refs.length === 0 && leaf.type === "notary") continue; // its stores are in the compiled policy
      const texts = refs.map((ref) => this.secretTexts.peek(secretRefName(ref)));
      // Every Secret of the entry is read (or taken as kept) again when one is not at hand.
      if (texts.includes(undefined)) unread.set(leaf, refs);
      else
        materials.set(
          leaf,
          materialOf(leaf, (ref) => texts[refs.indexOf(ref)]!),
        );
    }
    return { materials, unread };
  }
}

/**
 * The Notation stores of the TrustRoot an entry names. A rule naming a root without them denies before it verifies
 * (trust-root-references.ts); should the root go between that and now, empty stores trust nothing.
 */
function notationStoresOf(trustRoots: ReadonlyMap<string, TrustRoot>, name: string): NotaryStores {
  return trustRoots.get(name)?.notation ?? { ca: [], signingAuthority: [], tsa: [] };
}

/** The Secrets an entry's key or certificate stores are in. */
function secretRefsOf(leaf: StaticKeyAttestor | NotaryAttestor): SecretRef[] {
  if (leaf.type === "staticKey") return "secretRef" in leaf.key ? [leaf.key.secretRef] : [];
  return [leaf.ca, leaf.signingAuthority, leaf.tsa].flatMap((store) => ("secretRef" in store ? [store.secretRef] : []));
}

/** An entry's material from the policy and the Secrets' texts (each at hand: read within the TTL). */
function materialOf(leaf: StaticKeyAttestor | NotaryAttestor, textOf: (ref: SecretRef) => string): MaterialOf {
  if (leaf.type === "staticKey") {
    const key = leaf.key;
    try {
      return readKeyOf("pem" in key ? key.pem : textOf(key.secretRef));
    } catch (e) {
      return { error: `key ${"secretRef" in key ? `k8s://${secretRefName(key.secretRef)}` : leaf.label}: ${(e as Error).message}` };
    }
  }
  const ids: string[] = [];
  const stores: Partial<Record<"ca" | "signingAuthority" | "tsa", readonly Uint8Array[]>> = {};
  for (const name of ["ca", "signingAuthority", "tsa"] as const) {
    const store = leaf[name];
    if ("der" in store) {
      stores[name] = store.der;
      continue;
    }
    const read = readStoreOf(textOf(store.secretRef), name === "tsa" ? "tsa" : "trust");
    if ("error" in read) return { error: `${leaf.label}: certificates k8s://${secretRefName(store.secretRef)}: ${read.error}` };
    stores[name] = read.der;
    ids.push(read.id);
  }
  return { stores: stores as NotaryStores, id: ids.join("+") };
}

/** The material read, and why the rest could not be. */
function splitMaterials(materials: ReadonlyMap<LeafAttestor, MaterialOf>): { read: Map<LeafAttestor, Material>; unreadable: string[] } {
  const read = new Map<LeafAttestor, Material>();
  const unreadable: string[] = [];
  for (const [leaf, k] of materials)
    if ("error" in k) unreadable.push(k.error);
    else read.set(leaf, k);
  return { read, unreadable };
}

/** Every attestor entry of the rule and of its attestation checks. */
function leavesOf(request: VerificationRequest): readonly LeafAttestor[] {
  const ofRule = leavesOfSets(request.attestors);
  const checks = request.attestations;
  if (!checks) return ofRule;
  // Once per rule too: a rule's attestation checks are one array for as long as the rule is in force.
  let all = leavesWithChecks.get(checks);
  if (all?.ofRule !== ofRule) leavesWithChecks.set(checks, (all = { ofRule, leaves: [...ofRule, ...checks.flatMap((c) => leavesOfSets(c.attestors))] }));
  return all.leaves;
}

const leavesWithChecks = new WeakMap<NonNullable<VerificationRequest["attestations"]>, { ofRule: readonly LeafAttestor[]; leaves: readonly LeafAttestor[] }>();

/** leafAttestors, once per policy's attestor list (policies are replaced, not changed, on reload). */
function leavesOfSets(sets: readonly AttestorSet[]): readonly LeafAttestor[] {
  let leaves = leavesBySets.get(sets);
  if (!leaves) leavesBySets.set(sets, (leaves = leafAttestors(sets)));
  return leaves;
}

const leavesBySets = new WeakMap<readonly AttestorSet[], readonly LeafAttestor[]>();

function secretRefName(ref: SecretRef): string {
  return `${ref.namespace}/${ref.secret}/${ref.key}`;
}

/** How long a key or certificates read from a Secret are used before they are read again. */
const SECRET_TTL_MS = 10_000;

/** A static key entry's key, and the id of its PEM, which tells one key read from a Secret from the next. */
type ReadKey = { key: KeyObject; id: string };
/** A notary entry's certificate stores when one is in a Secret, and the ids of the PEMs read. */
type ReadStores = { stores: NotaryStores; id: string };
type Material = ReadKey | ReadStores;
type MaterialOf = Material | { error: string };

// Each PEM is parsed once, and stands in the cache key by a short id: its hash, so that the same PEM has the same
// id in every process sharing results (serve --workers) and another PEM never has it; forgetting PEMs (past 1,000)
// costs a parse, never a wrong hit.
const readKeys = new Map<string, ReadKey>();
function readKeyOf(pem: string): ReadKey {
  let read = readKeys.get(pem);
  if (!read) {
    read = { key: publicKeyFromPem(pem), id: createHash("sha256").update(pem).digest("base64url") };
    if (readKeys.size >= 1_000) readKeys.clear();
    readKeys.set(pem, read);
  }
  return read;
}

// A store's PEM is read once in the same way (a Secret's text, as Notation reads a trust store's files).
const readStores = new Map<string, { der: Uint8Array[]; id: string } | { error: string }>();
function readStoreOf(pem: string, purpose: "trust" | "tsa"): { der: Uint8Array[]; id: string } | { error: string } {
  const name = `${purpose}\u0000${pem}`;
  let read = readStores.get(name);
  if (!read) {
    const certificates = readStoreCertificates(pem, purpose);
    read = "error" in certificates ? certificates : { der: certificates.der, id: createHash("sha256").update(pem).digest("base64url") };
    if (readStores.size >= 1_000) readStores.clear();
    readStores.set(name, read);
  }
  return read;
}

/**
 * The statements of one attestation check that verify: each attestation of the predicate type whose envelope's
 * signature satisfies at least one entry of the check's attestors (its subject and type bound to the image),
 * with every entry it satisfies and who signed it. The sets are judged in the core, over the signers of the
 * statements that pass their conditions, so that `count` counts signers across statements.
 */
function verifyAttestations(
  check: { index: number; predicateType: string; attestors: readonly AttestorSet[] },
  discovery: Discovery,
  digest: string,
  contextOf: (leaf: SigstoreAttestor, binding: (item: SignedItem) => string | undefined) => EntryContext,
): VerifiedAttestation {
  const verified: VerifiedAttestation = { index: check.index, predicateType: check.predicateType, statements: [], failures: [] };
  const binding = attestationBinding(digest, check.predicateType);
  for (const item of discovery.attestations) {
    const read = inTotoStatement(item);
    if ("error" in read || read.statement.predicateType !== check.predicateType) continue;
    const signers: SignerEvidence[] = [];
    const outcomes = new Map<string, EntryOutcome>();
    for (const leaf of leafAttestors(check.attestors)) {
      // Refused when the policy loads (compile-image-policy.ts): attestations are Sigstore-signed.
      if (leaf.type === "notary") continue;
      const outcome = verifyItem(item, leaf, contextOf(leaf, binding));
      if (outcome.ok) signers.push(outcome.evidence);
      outcomes.set(leaf.path, outcome.ok ? { ok: true, signers: [outcome.evidence] } : { ok: false, reason: outcome.reason });
    }
    if (signers.length > 0) verified.statements.push({ statement: read.statement as Record<string, unknown>, signers });
    else if (verified.failures.length < 3) verified.failures.push(`${item.location}: ${judgeAttestors(check.attestors, outcomes).explanation}`);
  }
  if (verified.statements.length === 0 && verified.failures.length === 0) verified.failures.push(`no attestation of type ${check.predicateType} found`);
  return verified;
}

/**
 * Every distinct signer whose signature satisfies the entry (N of M counts signers, not entries: the judgement
 * needs all the candidates); otherwise the most telling reason why none did. A key entry has one possible
 * signer, its key: the first signature that satisfies it is enough.
 */
function judgeLeaf(leaf: SigstoreAttestor, discovery: Discovery, cx: Parameters<typeof verifyItem>[2]): EntryOutcome {
  if (discovery.items.length === 0) return { ok: false, reason: "no signature found" };
  const failures: Array<Extract<ItemOutcome, { ok: false }>> = [];
  const signers = new Map<string, SignerEvidence>();
  for (const item of discovery.items) {
    const outcome = verifyItem(item, leaf, cx);
    if (!outcome.ok) failures.push(outcome);
    else if (!signers.has(outcome.evidence.signer)) {
      signers.set(outcome.evidence.signer, outcome.evidence);
      if (leaf.type === "staticKey") break;
    }
  }
  if (signers.size > 0) return { ok: true, signers: [...signers.values()] };
  const telling = failures.find((f) => !f.notThisSigner);
  if (telling) return { ok: false, reason: telling.reason };
  const n = discovery.items.length;
  return { ok: false, reason: `no signature by this ${leaf.type === "staticKey" ? "key" : "identity"} (${n} signature${n === 1 ? "" : "s"} checked)` };
}
