// A Namespace created or updated, under --pod-security: invalid pod-security labels are refused, and a tightened
// enforce level is answered with warnings naming the existing pods that would violate it (PSA's ValidateNamespace).
import type { AdmissionRequest } from "../core/admission-review.ts";
import { allow, deny, type Decision } from "../core/decision.ts";
import { asObject } from "../core/primitives/json-shapes.ts";
import { POD_SECURITY_POLICY } from "../core/pod-security/psa-decision.ts";
import {
  checkNamespaceChange,
  NAMESPACE_MAX_PODS_TO_CHECK,
  NAMESPACE_POD_CHECK_BUDGET_MS,
  type PodSecurityContext,
} from "../core/pod-security/psa-evaluate.ts";
import type { NamespacePods } from "../kube/namespace-pods.ts";

type NamespaceChange = AdmissionRequest & { operation: "CREATE" | "UPDATE" };

/** Whether a Namespace request is one Pod Security Admission checks: a create or update of the object itself. */
export function isCheckedNamespaceChange(request: AdmissionRequest): request is NamespaceChange {
  return (request.operation === "CREATE" || request.operation === "UPDATE") && !request.subResource;
}

export async function checkNamespace(
  request: NamespaceChange,
  podSecurity: PodSecurityContext,
  pods: NamespacePods | undefined,
  deadline: number,
): Promise<Decision> {
  const labelsOf = (o: unknown) => asObject(asObject(asObject(o)?.metadata)?.labels) as Record<string, string> | undefined;
  const labels = labelsOf(request.object);
  const oldLabels = labelsOf(request.oldObject);
  const name = request.name || (asObject(asObject(request.object)?.metadata)?.name as string | undefined) || "";
  const enforceChanged = ["pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/enforce-version"].some((k) => labels?.[k] !== oldLabels?.[k]);
  // The pods are listed only when the enforce policy changed on an update: the check looks at them only then.
  const existing = request.operation === "UPDATE" && enforceChanged ? await pods?.list(name, NAMESPACE_MAX_PODS_TO_CHECK, deadline) : [];
  // PSA's budget: one second, or half of what is left of the request's time.
  const until = Date.now() + Math.min(NAMESPACE_POD_CHECK_BUDGET_MS, (deadline - Date.now()) / 2);
  const outcome = checkNamespaceChange(
    { operation: request.operation, name, labels, ...(request.operation === "UPDATE" ? { oldLabels } : {}) },
    existing,
    podSecurity,
    { outOfTime: () => Date.now() > until },
  );
  return outcome.allowed
    ? allow({ warnings: outcome.warnings, auditAnnotations: outcome.auditAnnotations })
    : deny([{ policy: POD_SECURITY_POLICY, rule: "namespace", message: outcome.denial ?? "", text: outcome.denial ?? "" }], {
        warnings: outcome.warnings,
        auditAnnotations: outcome.auditAnnotations,
      });
}
