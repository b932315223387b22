// The PodRestriction kind in the policy-kind registry: checked against its JSON Schema, then compiled with the
// shipped profiles at hand (compilePodRestriction does both), indexed by binding once per load, and judged on every
// pod of a subject whose pods PodRestrictions may see.
import { combineDecisions } from "../decision.ts";
import { POLICY_API_VERSION, type PolicyKind } from "../policy-kind.ts";
import { compilePodRestriction, type PodRestriction } from "./pod-restriction.ts";
import { decidePodRestrictions } from "./pod-restriction-decision.ts";
import { PodRestrictionIndex } from "./restriction-index.ts";
import { clusterKindNamespaceIssue } from "../namespaced-policy.ts";

/** The PodRestrictions design writes policy/v1alpha1; its examples load unchanged. */
const SEED_API_VERSION = "policy/v1alpha1";

export const podRestrictionKind: PolicyKind<PodRestriction, PodRestrictionIndex> = {
  kind: "PodRestriction",
  apiVersions: [POLICY_API_VERSION, SEED_API_VERSION],
  compile(document, cx) {
    const namespaced = clusterKindNamespaceIssue(document, { namespaced: "NamespacedPodRestriction", cluster: "PodRestriction" });
    if (namespaced) return { issues: [namespaced] };
    // The schema's issues (describeSchemaError) when it refuses the document; the compiler's otherwise.
    return compilePodRestriction(document, { source: cx.source, ...(cx.profiles ? { profiles: cx.profiles } : {}) });
  },
  prepare: (policies) => new PodRestrictionIndex(policies),
  usesNamespaceLabels: (index) => index.usesSelectors,
  evaluate(index, subject, cx) {
    if (!subject.judgePods || index.all.length === 0) return undefined;
    // The entry of images a custom resource keeps outside pods (imagePaths) is not a pod.
    const pods = subject.pods.filter((pod) => !pod.pathImages);
    if (pods.length === 0) return undefined;
    return combineDecisions(...pods.map((pod) => decidePodRestrictions(index, pod, subject.namespace, cx.namespaceLabels)));
  },
};
