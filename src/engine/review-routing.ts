// Where a request goes, decided in one place for every entry point: a Namespace to Pod Security Admission's
// namespace check, everything else through the one extraction (Pods, built-in workloads, registered custom
// resources, the kinds imagePaths name, ImageReviews) to a subject, or nowhere when it holds nothing to review.
import type { AdmissionRequest } from "../core/admission-review.ts";
import {
  subjectOfImageReview,
  subjectOfObject,
  subjectOfRequest,
  type AdmissionSubject,
  type Extraction,
  type RequestUser,
} from "../core/admission-subject.ts";
import type { ImageReviewSpec } from "../core/image-review.ts";

/** What an entry point asks to be reviewed. */
export type Reviewable =
  /** /validate and /mutate: an AdmissionReview's request. */
  | { kind: "admission"; request: AdmissionRequest }
  /** /imagereview: the ImagePolicyWebhook's spec. */
  | { kind: "image-review"; spec: ImageReviewSpec }
  /** `check`, `verify`, the background scan: a manifest, as if it were created in `namespace` by `user`. */
  | { kind: "object"; object: Record<string, unknown>; namespace?: string | undefined; user?: RequestUser | undefined }
  /** A subject already extracted (tools and tests that build one). */
  | { kind: "subject"; subject: AdmissionSubject };

export type Route =
  /** A Namespace on /validate: only Pod Security Admission has something to say (its labels), when it is on. */
  { to: "namespace"; request: AdmissionRequest } | { to: "nothing"; why: string } | { to: "subject"; subject: AdmissionSubject };

/** `extraction`: the pod templates and image paths of the policies the caller is judged by. */
export function routeReview(input: Reviewable, endpoint: string, extraction: Extraction): Route {
  switch (input.kind) {
    case "admission": {
      const resource = input.request.resource;
      if (endpoint === "validate" && (resource?.group ?? "") === "" && resource?.resource === "namespaces") return { to: "namespace", request: input.request };
      return routeOf(subjectOfRequest(input.request, extraction));
    }
    case "image-review":
      return { to: "subject", subject: subjectOfImageReview(input.spec) };
    case "object":
      return routeOf(subjectOfObject(input.object, extraction, input.namespace, input.user));
    case "subject":
      return { to: "subject", subject: input.subject };
  }
}

function routeOf(plan: ReturnType<typeof subjectOfRequest>): Route {
  return plan.review ? { to: "subject", subject: plan.subject } : { to: "nothing", why: plan.why };
}
