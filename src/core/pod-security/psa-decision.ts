// Pod Security Admission's verdict on an admission subject, as one Decision of the pipeline: each Pod (enforced,
// warned, audited) and each workload's pod template (warned and audited only) judged by evaluatePodSecurity;
// a Pod update only when PSA would judge it (isSignificantPodUpdate). The denial keeps PSA's own wording, so
// runbooks that match `violates PodSecurity "restricted:latest"` keep working. Pure.
import type { AdmissionSubject } from "../admission-subject.ts";
import { allow, deny, type Decision, type Violation } from "../decision.ts";
import { asObject } from "../primitives/json-shapes.ts";
import { evaluatePodSecurity, isSignificantPodUpdate, type PodSecurityContext } from "./psa-evaluate.ts";

/** The policy name PSA's failures are reported under (denials, reports, `check`). */
export const POD_SECURITY_POLICY = "PodSecurity";

export function podSecurityDecision(
  subject: AdmissionSubject,
  namespaceLabels: Readonly<Record<string, string>> | undefined,
  cx: PodSecurityContext,
): Decision | undefined {
  if (subject.origin !== "object" || !subject.judgePods) return undefined;
  const request = subject.request;
  const isPod = (request.resource?.group ?? "") === "" && request.resource?.resource === "pods";
  if (isPod && request.operation === "UPDATE" && !request.subResource) {
    const object = asObject(request.object);
    const old = asObject(request.oldObject);
    if (object && old && !isSignificantPodUpdate(object, old)) return undefined;
  }
  const violations: Violation[] = [];
  const warnings: string[] = [];
  const auditAnnotations: Record<string, string> = {};
  let judged = false;
  for (const pod of subject.pods) {
    if (pod.pathImages) continue;
    judged = true;
    const outcome = evaluatePodSecurity(
      {
        namespace: subject.namespace,
        namespaceLabels,
        ...(request.userInfo?.username ? { username: request.userInfo.username } : {}),
        object: pod.isTemplate || !isPod ? "template" : "pod",
        pod,
      },
      cx,
    );
    Object.assign(auditAnnotations, outcome.auditAnnotations);
    warnings.push(...outcome.warnings);
    if (!outcome.allowed && outcome.denial !== undefined)
      violations.push({
        policy: POD_SECURITY_POLICY,
        rule: "enforce",
        ...(pod.spec.field ? { field: pod.spec.field } : {}),
        message: outcome.denial,
        text: outcome.denial,
      });
  }
  if (!judged) return undefined;
  return violations.length > 0 ? deny(violations, { warnings, auditAnnotations }) : allow({ warnings, auditAnnotations });
}
