// NamespacedPodRestriction: a PodRestriction its namespace's owners write, compiled into the PodRestriction list
// and bound to its namespace only (see namespaced-policy.ts). It is always a Drop policy, judged in addition to
// the cluster's composition (pod-restriction-decision.ts): it can deny more, never accept what a cluster policy
// denies, and a cluster Accept policy does not exempt a pod from it.
import type { FieldIssue, CompileContext } from "../policy-kind.ts";
import { namespacedPolicyName, readNamespacedDocument } from "../namespaced-policy.ts";
import { podRestrictionKind } from "./pod-restriction-kind.ts";
import type { PodRestriction } from "./pod-restriction.ts";

export const NAMESPACED_POD_RESTRICTION = "NamespacedPodRestriction";

const REFUSED = [
  {
    path: ["binding"],
    why: "it applies only in its own namespace, and only as a Drop policy (every pod there must satisfy it; an Accept policy would exempt pods from the cluster's policies)",
  },
] as const;

export function compileNamespacedPodRestriction(document: Record<string, unknown>, cx: CompileContext): { policy?: PodRestriction; issues: FieldIssue[] } {
  const read = readNamespacedDocument(document, { namespaced: NAMESPACED_POD_RESTRICTION, cluster: "PodRestriction" }, REFUSED);
  if (!read.namespaced) return { issues: read.issues };
  const { namespace, clusterDocument } = read.namespaced;
  const compiled = podRestrictionKind.compile(clusterDocument, cx);
  // A PodRestriction compiles to a policy only when it has no issue.
  if (!compiled.policy) return { issues: compiled.issues };
  const policy: PodRestriction = {
    ...compiled.policy,
    name: namespacedPolicyName(namespace, compiled.policy.name),
    namespace,
    mode: "Drop",
    namespaces: [namespace],
  };
  return { policy, issues: [] };
}
