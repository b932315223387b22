// The ImagePolicy kind in the policy-kind registry: schema, compile, and evaluation of a subject's images,
// one pod at a time (each pod brings its own break-glass and `*.image-policy.k8s.io/*` annotations).
import { Ajv, type ErrorObject } from "ajv";
import { imagesByPod, type AdmissionSubject } from "../admission-subject.ts";
import { combineDecisions, deny, type Decision } from "../decision.ts";
import { imagePolicyAnnotations } from "../image-review.ts";
import type { FieldIssue, KindEvaluationContext, PolicyKind } from "../policy-kind.ts";
import { unknownFieldMessage } from "../unknown-field.ts";
import { clusterKindNamespaceIssue } from "../namespaced-policy.ts";
import { compileImagePolicy, type RawImagePolicy } from "./compile-image-policy.ts";
import { evaluateImagePolicies, type ImagePolicy } from "./image-policy.ts";
import imagePolicySchema from "./image-policy.schema.json" with { type: "json" };

export const POLICY_API_VERSION = "imprimatur.dev/v1alpha1";

// verbose: an error carries its schema, whose properties name the fields an unknown one may have meant.
const ajv = new Ajv({ allErrors: true, strict: true, useDefaults: false, verbose: true });
const validateSchema = ajv.compile(imagePolicySchema);

export const imagePolicyKind: PolicyKind<ImagePolicy, readonly ImagePolicy[]> = {
  kind: "ImagePolicy",
  apiVersions: [POLICY_API_VERSION],
  compile(document, cx) {
    const namespaced = clusterKindNamespaceIssue(document, { namespaced: "NamespacedImagePolicy", cluster: "ImagePolicy" });
    if (namespaced) return { issues: [namespaced] };
    if (!validateSchema(document)) return { issues: (validateSchema.errors ?? []).map(describeSchemaError) };
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

/** An ajv error as a field issue: its path, and words a policy author can act on (unknown fields name the known ones). */
export function describeSchemaError(e: ErrorObject): FieldIssue {
  const path: Array<string | number> = e.instancePath
    .split("/")
    .slice(1)
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
  switch (e.keyword) {
    case "additionalProperties":
      return {
        path: [...path, String(e.params.additionalProperty)],
        message: unknownFieldMessage(
          String(e.params.additionalProperty),
          Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {}),
        ),
      };
    case "required":
      return { path, message: `missing required field ${JSON.stringify(e.params.missingProperty)}` };
    case "enum":
      return { path, message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}` };
    case "const":
      return { path, message: `must be ${JSON.stringify(e.params.allowedValue)}` };
    default:
      return { path, message: e.message ?? e.keyword };
  }
}
