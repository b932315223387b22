// The ImagePolicy kind in the policy-kind registry: schema, compile, and evaluation of a subject's images,
// one pod at a time (each pod brings its own break-glass and `*.image-policy.k8s.io/*` annotations).
import { imagesByPod, type AdmissionSubject } from "../admission-subject.ts";
import { combineDecisions, deny, type Decision } from "../decision.ts";
import { imagePolicyAnnotations } from "../image-review.ts";
import { POLICY_API_VERSION, type KindEvaluationContext, type PolicyKind } from "../policy-kind.ts";
import { schemaCheck } from "../schema-issues.ts";
import { clusterKindNamespaceIssue } from "../namespaced-policy.ts";
import { compileImagePolicy, type RawImagePolicy } from "./compile-image-policy.ts";
import { evaluateImagePolicies, type ImagePolicy } from "./image-policy.ts";
import imagePolicySchema from "./image-policy.schema.json" with { type: "json" };

const schemaIssues = schemaCheck(imagePolicySchema);

export const imagePolicyKind: PolicyKind<ImagePolicy, readonly ImagePolicy[]> = {
  kind: "ImagePolicy",
  apiVersions: [POLICY_API_VERSION],
  compile(document, cx) {
    const namespaced = clusterKindNamespaceIssue(document, { namespaced: "NamespacedImagePolicy", cluster: "ImagePolicy" });
    if (namespaced) return { issues: [namespaced] };
    const shape = schemaIssues(document);
    if (shape.length > 0) return { issues: shape };
    const compiled = compileImagePolicy(document as unknown as RawImagePolicy, cx.source, cx.related);
    return compiled.policy ? { policy: compiled.policy, issues: compiled.errors } : { issues: compiled.errors };
  },
  prepare: (policies) => policies,
  usesNamespaceLabels: (policies) => policies.some((p) => p.namespaceSelector !== undefined),
  evaluate: (policies, subject, cx) => evaluateSubjectImages(policies, subject, cx),
};

/** Undefined when the subject has no image to review (an update that changed none). */
export function evaluateSubjectImages(policies: readonly ImagePolicy[], subject: AdmissionSubject, kindCx: KindEvaluationContext): Decision | undefined {
  const cx = subject.origin === "imagereview" ? { ...kindCx, imageReview: true } : kindCx;
  const decisions = imagesByPod(subject).map(({ pod, images }) =>
    evaluateImagePolicies(
      policies,
      {
        namespace: subject.namespace,
        annotations: imagePolicyAnnotations(pod.annotations),
        // An ImageReview names images, not fields of an object: its denials name the image only.
        images: images.map(({ image, field }) => (subject.origin === "imagereview" ? { image } : { image, field })),
      },
      cx,
    ),
  );
  // Fail closed: an image imagePaths select but cannot locate is neither reviewed nor pinnable.
  if (subject.extractionErrors?.length)
    decisions.push(deny(subject.extractionErrors.map((e) => ({ policy: e.policy, rule: "imagePaths", message: e.message }))));
  if (decisions.length === 0) return undefined;
  return decisions.length === 1 ? decisions[0] : combineDecisions(...decisions);
}
