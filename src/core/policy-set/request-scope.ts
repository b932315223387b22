// The policies a request is judged by, after each policy's match/exclude (request-match.ts). Like cluster scoping,
// it picks policies before evaluation, so every kind, digest pinning and signature verification see the same
// set: a policy out of scope neither denies, pins nor verifies. Policies whose scope cannot be decided, or whose
// condition fails while the server fails closed, become denials that say why.
import { admittedFailingOpen, type Decision, type Violation } from "../decision.ts";
import { preparePolicies, type PolicySet, type PreparedPolicies } from "./policy-kinds.ts";
import { matchRequest, ruleCovers, type MatchedRequest, type RequestMatch, type RuleResource } from "../request-match/request-match.ts";

export interface RequestScope {
  prepared: PreparedPolicies;
  /** Denials for policies whose scope could not be decided (or whose condition failed, failing closed). */
  violations: Violation[];
  /**
   * Failing open, the policies left out because a condition failed, as an allow that carries the fail-open
   * trace (a warning each, the audit annotation, the entries the audit log is written from): the admission they
   * leave is a fail-open one, as every other.
   */
  failedOpen?: Decision;
}

type Matchable = { readonly name: string; readonly namespace?: string; readonly match?: RequestMatch };

// Worked out once per loaded set (a set is replaced, not changed, on reload): admissions ask on every request.
const scopedSets = new WeakMap<PolicySet, boolean>();

/** Whether any policy of the set says which requests it is for (when none does, every request sees the whole set). */
export function isRequestScoped(set: PolicySet): boolean {
  let scoped = scopedSets.get(set);
  if (scoped === undefined) {
    scoped = set.ImagePolicy.some((p) => p.match !== undefined) || set.PodRestriction.some((p) => p.match !== undefined);
    scopedSets.set(set, scoped);
  }
  return scoped;
}

// Sets prepared for a subset of a loaded set, by the names left out. Requests fall into few subsets (a policy for
// build pods is out of scope for every other pod), so each is prepared once, not per request.
const subsetsOf = new WeakMap<PreparedPolicies, Map<string, PreparedPolicies>>();
const MAX_SUBSETS = 256;

export function scopeRequest(prepared: PreparedPolicies, req: MatchedRequest, failOpen: boolean): RequestScope {
  const set = prepared.set;
  if (!isRequestScoped(set)) return { prepared, violations: [] };
  const violations: Violation[] = [];
  const failedOpen: LeftOut[] = [];
  const left: string[] = [];
  const keep = <P extends Matchable>(kind: "ImagePolicy" | "PodRestriction", policies: readonly P[]): P[] =>
    policies.filter((p) => {
      if (!p.match) return true;
      const outcome = matchRequest(p.match, req);
      if ("inScope" in outcome && outcome.inScope) return true;
      left.push(`${kind}/${p.name}`);
      // Namespaced policies are named by their kind, as their other denials are.
      const kindField = p.namespace !== undefined ? { kind: `Namespaced${kind}` as const } : kind === "PodRestriction" ? { kind } : {};
      if ("undecided" in outcome) violations.push({ policy: p.name, ...kindField, rule: outcome.rule, message: outcome.undecided });
      // VAP's failurePolicy Ignore: a failed condition leaves the request out of this policy's scope.
      if ("conditionError" in outcome && !failOpen) violations.push({ policy: p.name, ...kindField, rule: outcome.rule, message: outcome.conditionError });
      if ("conditionError" in outcome && failOpen) failedOpen.push({ kind: kindField.kind ?? kind, name: p.name, error: outcome.conditionError });
      return false;
    });
  const scoped: PolicySet = { ...set, ImagePolicy: keep("ImagePolicy", set.ImagePolicy), PodRestriction: keep("PodRestriction", set.PodRestriction) };
  if (left.length === 0) return { prepared, violations };
  let subsets = subsetsOf.get(prepared);
  if (!subsets) subsetsOf.set(prepared, (subsets = new Map()));
  const key = left.join("\u0000");
  let subset = subsets.get(key);
  if (!subset) {
    if (subsets.size >= MAX_SUBSETS) subsets.clear();
    subsets.set(key, (subset = preparePolicies(scoped)));
  }
  return { prepared: subset, violations, ...(failedOpen.length > 0 ? { failedOpen: leftOutFailingOpen(failedOpen) } : {}) };
}

/** A policy left out because its condition failed while failing open. */
interface LeftOut {
  kind: string;
  name: string;
  error: string;
}

function leftOutFailingOpen(left: readonly LeftOut[]): Decision {
  return admittedFailingOpen(
    left.map(({ kind, name, error }) => `${kind} ${name} was left out: ${error}; the server fails open`),
    left.map(({ kind, name, error }) => ({ backend: `matchConditions/${kind}/${name}`, error })),
  );
}

/** A resource a webhook rule sends to Imprimatur, for any operation; "*" as the version stands for any. */
export type WebhookResource = RuleResource;

/**
 * Whether some policy may be for requests on this resource: a policy without resource rules may be for any. The
 * webhook configurations leave out the rest, so the apiserver does not call Imprimatur for requests no policy is for.
 */
export function mayMatchResource(set: PolicySet, r: WebhookResource): boolean {
  const mayMatch = (p: Matchable) => p.match?.resourceRules === undefined || p.match.resourceRules.some((rule) => ruleCovers(rule, r));
  return set.ImagePolicy.some(mayMatch) || set.PodRestriction.some(mayMatch);
}
