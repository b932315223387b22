// Composition (the seed's "Why not both?"): a pod is admitted if ANY bound Accept restriction is satisfied;
// otherwise it must satisfy ALL bound Drop restrictions; with no Drop restriction bound it is admitted.
// A denial lists every violated Drop restriction; the Accept policies that did not accept are warnings.
// NamespacedPodRestrictions (always Drop) are judged apart, in addition: see decidePodRestrictions.
import { allow, combineDecisions, deny, type Decision, type Pass, type Violation } from "../decision.ts";
import { describeLabelSelector } from "../label-selector.ts";
import { podRestrictionFindings } from "./pod-restriction.ts";
import type { PodUnderReview } from "../pod-under-review.ts";
import type { PodRestrictionIndex } from "./restriction-index.ts";
import type { PodRestriction } from "./pod-restriction.ts";
import { splitByAction } from "../validation-actions.ts";
import { UNKNOWN_NAMESPACE_LABELS_HINT } from "../namespace-labels.ts";

export const ACCEPTED_BY_ANNOTATION = "pod-restriction-accepted-by";

export function decidePodRestrictions(
  index: PodRestrictionIndex,
  pod: PodUnderReview,
  namespace: string,
  namespaceLabels: Record<string, string> | undefined,
): Decision {
  const { bound, undecided } = index.bound(namespace, namespaceLabels);
  if (undecided.length > 0) {
    return deny(
      undecided.map((p) => ({
        policy: p.name,
        kind: "PodRestriction" as const,
        rule: "binding.namespaceSelector",
        message:
          `the labels of namespace ${JSON.stringify(namespace)} are unknown, so whether this PodRestriction applies ` +
          `(selector ${describeLabelSelector(p.namespaceSelector!)}) cannot be decided; ` +
          UNKNOWN_NAMESPACE_LABELS_HINT,
      })),
    );
  }
  // A namespace's own policies only add restrictions: a cluster Accept policy that accepts the pod exempts it
  // from the cluster's Drop policies, not from its namespace's (else the namespace owners' rules would not hold
  // for the very pods the cluster chose to trust), and they never accept a pod the cluster's policies deny.
  const namespaced = bound.filter((p) => p.namespace !== undefined);
  if (namespaced.length === 0) return decideClusterComposition(bound, pod);
  const cluster = bound.filter((p) => p.namespace === undefined);
  return combineDecisions(decideClusterComposition(cluster, pod), judgeDrops(namespaced, pod, []));
}

function decideClusterComposition(bound: readonly PodRestriction[], pod: PodUnderReview): Decision {
  const drops = bound.filter((p) => p.mode === "Drop");
  if (drops.length === 0) return allow();

  const notAccepted: string[] = [];
  for (const p of bound) {
    if (p.mode !== "Accept") continue;
    const findings = podRestrictionFindings(p, pod);
    if (findings.length === 0)
      return allow({
        auditAnnotations: { [ACCEPTED_BY_ANNOTATION]: p.name },
        passes: [{ kind: "PodRestriction", policy: p.name, rule: "accept", field: pod.spec.field || "spec" }],
      });
    notAccepted.push(
      `not accepted by PodRestriction ${p.name}: ${findings[0]!.field} ${findings[0]!.message}${findings.length > 1 ? ` (and ${findings.length - 1} more)` : ""}`,
    );
  }
  return judgeDrops(drops, pod, notAccepted);
}

/** Every Drop policy must be satisfied; `notAccepted` (why no Accept policy admitted the pod) warns on a denial. */
function judgeDrops(drops: readonly PodRestriction[], pod: PodUnderReview, notAccepted: string[]): Decision {
  const violations: Violation[] = [];
  const passes: Pass[] = [];
  for (const p of drops) {
    const findings = podRestrictionFindings(p, pod);
    const kind = p.namespace === undefined ? "PodRestriction" : "NamespacedPodRestriction";
    for (const f of findings)
      violations.push({
        policy: p.name,
        kind,
        rule: f.rule,
        field: f.field,
        message: f.message,
        ...(f.actions ? { actions: f.actions } : {}),
      });
    if (findings.length === 0) passes.push({ kind, policy: p.name, rule: "all", field: pod.spec.field || "spec" });
  }
  // Failures of checks set to Warn or Audit only do not deny: they are the decision's advisories.
  const { enforced, advisory } = splitByAction(violations);
  const advised = advisory.length > 0 ? { advisories: advisory } : {};
  if (enforced.length === 0) return allow({ passes, ...advised });
  return deny(enforced, { warnings: notAccepted, ...(passes.length > 0 ? { passes } : {}), ...advised });
}
