// What the pinner and the verifier are told about a subject's pods: where a pod's pins are recorded, and whose pull
// secrets apply (its own, then its service account's). Pure.
import type { AdmissionSubject } from "../core/admission-subject.ts";
import { asObject } from "../core/primitives/json-shapes.ts";
import type { PreparedPolicies } from "../core/policy-set/policy-kinds.ts";
import type { PinRequest } from "../pinning/image-pinner.ts";

export function pinRequest(subject: AdmissionSubject, prepared: PreparedPolicies): PinRequest {
  return {
    namespace: subject.namespace,
    images: subject.images,
    pods: subject.pods.map((pod) => pinPod(subject, pod)),
    policies: prepared.set.ImagePolicy,
  };
}

/** One pod of a PinRequest: where its pins are recorded and whose pull secrets apply. */
export function pinPod(subject: AdmissionSubject, pod: AdmissionSubject["pods"][number]): PinRequest["pods"][number] {
  // An ImageReview carries no pod: only the server's own credentials apply, and nothing is recorded.
  if (subject.origin === "imagereview") return { metadata: undefined };
  const spec = asObject(pod.spec.value);
  const serviceAccount = spec?.serviceAccountName ?? spec?.serviceAccount; // serviceAccount: the deprecated alias
  return {
    metadata: pod.pinRecord,
    pullSecrets: {
      namespace: subject.namespace,
      ...(Array.isArray(spec?.imagePullSecrets) ? { imagePullSecrets: spec.imagePullSecrets as Array<{ name?: string }> } : {}),
      ...(typeof serviceAccount === "string" && serviceAccount !== "" ? { serviceAccountName: serviceAccount } : {}),
    },
  };
}
