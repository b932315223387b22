// The built-in backend: the current ImagePolicy set evaluated by the pure core. Policies can be swapped
// atomically on reload; namespace labels come from whatever source the server was given.
import type { Decision } from "../core/decision.ts";
import { evaluateImagePolicies, type ImagePolicy } from "../core/image-policy.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import type { ReviewInput } from "./review-service.ts";

export function builtinEngine(getPolicies: () => readonly ImagePolicy[], namespaces: NamespaceLabelSource) {
  return (input: ReviewInput): Decision => {
    const namespace = input.spec.namespace ?? "";
    const labels = namespaces.labels(namespace);
    return evaluateImagePolicies(
      getPolicies(),
      {
        namespace,
        annotations: input.spec.annotations ?? {},
        images: input.spec.containers.map((c, i) => ({ image: c.image, ...(input.fields?.[i] ? { field: input.fields[i] } : {}) })),
      },
      labels === undefined ? {} : { namespaceLabels: labels },
    );
  };
}
