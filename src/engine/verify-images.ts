// Signature verification in a review: which images need it, each verified by digest with its own pod's
// credentials, and (on /mutate) the record of what was verified written onto the object.
import type { AdmissionSubject } from "../core/admission-subject.ts";
import type { JsonPatchOperation } from "../core/decision.ts";
import { registryAnswered, type PinningOutcome } from "../core/image-policy/digest-pinning.ts";
import { verifies, type ImagePolicy } from "../core/image-policy/image-policy.ts";
import { verificationsNeeded, verifiedImagesPatches, type VerificationNeed } from "../core/image-policy/image-verification.ts";
import { verificationKey, type ImageVerification } from "../core/verification-results.ts";
import { CLUSTER_UNREADABLE } from "../core/cluster-scope.ts";
import type { PreparedPolicies } from "../core/policy-set/policy-kinds.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import type { VerificationRequest, VerificationResult } from "../verification/image-verifier.ts";
import { lookupForPolicy, type PodLookup } from "../kube/pod-credentials.ts";
import type { ClusterTools, OnlineTools } from "./cluster-tools.ts";
import { pinPod, pinRequest } from "./pin-request.ts";

/** The images to verify, and the tools to verify them with (online only). */
export interface SignatureWork {
  tools: OnlineTools;
  needs: VerificationNeed[];
}

/**
 * Every image whose deciding allow rule has attestors, to verify by digest (verifySignatures). A tag under such a
 * rule is denied by digestVerify (its default), so only rules that set `digestVerify: false` verify a tag, at the
 * digest it resolves to now with the pod's credentials. Undefined offline: signatures then go unchecked.
 */
export function signaturesToVerify(
  tools: ClusterTools,
  policies: readonly ImagePolicy[],
  subject: AdmissionSubject,
  namespaceLabels: Record<string, string> | undefined,
): SignatureWork | undefined {
  if (!tools.online) return undefined;
  const needs = verificationsNeeded(policies, subject.namespace, subject.images, namespaceLabels === undefined ? {} : { namespaceLabels });
  // A tag under digestVerify is denied whatever its signatures say: nothing to look up.
  const looked = needs.some((n) => n.rule.digestVerify && !n.ref.digest) ? needs.filter((n) => !n.rule.digestVerify || n.ref.digest) : needs;
  return { tools, needs: looked };
}

/**
 * Each need verified with its pod's credentials, or with the credentials the caller presented (a node's pull);
 * `digests` (field → digest) are digests already pinned.
 */
export async function verifySignatures(
  work: SignatureWork,
  subject: AdmissionSubject,
  digests: ReadonlyMap<string, string>,
  deadline: number,
  presented?: CredentialLookup,
): Promise<Map<string, ImageVerification>> {
  const { tools, needs } = work;
  const results = new Map<string, ImageVerification>();
  if (needs.length === 0) return results;
  const lookups = new Map<number, Promise<PodLookup>>();
  const lookupOf = (pod: number) => {
    let lookup = lookups.get(pod);
    const at = subject.pods[pod];
    if (!lookup)
      lookups.set(
        pod,
        (lookup = presented
          ? Promise.resolve(tools.credentials.lookupPresented(presented))
          : tools.credentials.lookupFor(at ? pinPod(subject, at).pullSecrets : undefined, deadline)),
      );
    return lookup;
  };
  await Promise.all(
    needs.map(async (need) => {
      const pinned = digests.get(need.field);
      const target = pinned ? { ...need, ref: { ...need.ref, digest: pinned } } : need;
      results.set(verificationKey(need.policy.name, need.rule.index, need.image), await verifyOne(tools, target, await lookupOf(need.pod), deadline));
    }),
  );
  return results;
}

/**
 * verifySignatures' answer without an await, when it is at hand: every need has a digest, its pod's credentials are
 * known (read within their TTL, or presented) and the verifier has its result cached. Undefined otherwise (then
 * verifySignatures answers). A repeat admission of verified images is answered here, with no promise and no timer.
 */
export function cachedVerifications(
  work: SignatureWork,
  subject: AdmissionSubject,
  digests: ReadonlyMap<string, string>,
  presented?: CredentialLookup,
): Map<string, ImageVerification> | undefined {
  const { tools, needs } = work;
  const lookups = new Map<number, PodLookup | undefined>();
  const requests: VerificationRequest[] = [];
  for (const need of needs) {
    const digest = digests.get(need.field) ?? need.ref.digest;
    if (!digest) return undefined;
    let creds = lookups.get(need.pod);
    if (!lookups.has(need.pod)) {
      const at = subject.pods[need.pod];
      creds = presented ? tools.credentials.lookupPresented(presented) : tools.credentials.lookupKnown(at ? pinPod(subject, at).pullSecrets : undefined);
      lookups.set(need.pod, creds);
    }
    if (!creds || "error" in creds) return undefined;
    requests.push(verificationRequest(need, digest, lookupForPolicy(creds, need.policy)));
  }
  const found = tools.verifier.peekAll(requests);
  if (!found) return undefined;
  const results = new Map<string, ImageVerification>();
  needs.forEach((need, i) => results.set(verificationKey(need.policy.name, need.rule.index, need.image), withDigestOf(found[i]!, requests[i]!.image.digest)));
  return results;
}

async function verifyOne(tools: OnlineTools, need: VerificationNeed, creds: PodLookup, deadline: number): Promise<ImageVerification> {
  // Another cluster's secrets never stand in for the pod's: a cluster the server cannot read is a denial.
  if ("error" in creds && creds.code === CLUSTER_UNREADABLE) return { status: "denied", reason: creds.error };
  if ("error" in creds) return { status: "unavailable", reason: creds.error, registry: need.ref.registry };
  // A namespaced policy's lookups get the server's own credentials only where the registries file lends them.
  const lookup = lookupForPolicy(creds, need.policy);
  let digest = need.ref.digest;
  if (!digest) {
    const resolved = await tools.resolver.resolve(need.ref, lookup, deadline);
    if (!resolved.ok) {
      const reason = `its tag could not be resolved to a digest to verify: ${resolved.error}`;
      return registryAnswered(resolved.code) ? { status: "denied", reason } : { status: "unavailable", reason, registry: need.ref.registry };
    }
    digest = resolved.digest;
  }
  return withDigestOf(await tools.verifier.verify(verificationRequest(need, digest, lookup), deadline), digest);
}

/** What the verifier is asked for one need, at `digest`, with the pod's credentials for the need's policy. */
function verificationRequest(need: VerificationNeed, digest: string, lookup: CredentialLookup): VerificationRequest {
  return { image: { ...need.ref, digest }, policy: need.policy.name, rule: need.rule.index, ...askOf(need.rule), lookup };
}

/** What a rule asks the verifier, worked out once per rule (rules are replaced, not changed, on reload). */
function askOf(rule: VerificationNeed["rule"]): Pick<VerificationRequest, "attestors" | "attestations" | "signatureRepository"> {
  let ask = asks.get(rule);
  if (!ask)
    asks.set(
      rule,
      (ask = {
        attestors: rule.attestors ?? [],
        ...(rule.attestations
          ? { attestations: rule.attestations.map((a) => ({ index: a.index, predicateType: a.predicateType, attestors: a.attestors })) }
          : {}),
        ...(rule.signatureRepository ? { signatureRepository: rule.signatureRepository } : {}),
      }),
    );
  return ask;
}

const asks = new WeakMap<VerificationNeed["rule"], Pick<VerificationRequest, "attestors" | "attestations" | "signatureRepository">>();

/**
 * The same object for as long as the verifier caches the result: what was judged of it is kept with it
 * (src/core/image-policy/verified-judgements.ts).
 */
function withDigestOf(result: VerificationResult, digest: string): ImageVerification {
  let verification = withDigest.get(result);
  if (verification?.digest !== digest) withDigest.set(result, (verification = { ...result, digest }));
  return verification;
}

/** Each verifier result with the digest it was verified at (one per result: the verifier's key holds the digest). */
const withDigest = new WeakMap<VerificationResult, ImageVerification>();

/**
 * /mutate records what it verified on the object (`imprimatur.dev/verified-images`), at the digests it just
 * pinned, so what runs is what was verified; /validate then finds these results in the cache. A failed
 * verification adds nothing here: /validate denies it with the reason.
 */
export async function verifiedImagePatches(
  tools: OnlineTools,
  prepared: PreparedPolicies,
  namespaceLabels: Record<string, string> | undefined,
  subject: AdmissionSubject,
  pinning: PinningOutcome | undefined,
  deadline: number,
): Promise<JsonPatchOperation[]> {
  if (!prepared.set.ImagePolicy.some((p) => p.rules.some(verifies))) return [];
  const needs = verificationsNeeded(prepared.set.ImagePolicy, subject.namespace, subject.images, namespaceLabels === undefined ? {} : { namespaceLabels });
  if (needs.length === 0) return [];
  const pinnedDigests = new Map((pinning?.pinned ?? []).map((p) => [p.field, p.digest]));
  const results = await verifySignatures({ tools, needs }, subject, pinnedDigests, deadline);
  const pods = pinRequest(subject, prepared).pods.map((p) => p.metadata);
  // Where pinning already added its annotation (creating the map if needed), the record goes next to it.
  const podOf = new Map(subject.images.map((i) => [i.field, i.pod]));
  const pinnedAt = new Set(
    (pinning?.pinned ?? []).flatMap((p) => {
      const at = pods[podOf.get(p.field) ?? -1];
      return at ? [at.field] : [];
    }),
  );
  return verifiedImagesPatches(needs, results, pods, pinnedAt);
}
