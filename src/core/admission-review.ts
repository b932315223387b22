// AdmissionReview (admission.k8s.io/v1, and v1beta1 answered in kind): validation of the incoming review,
// which images a Pod request asks to run, and the response.
import { renderReason, type Decision } from "./decision.ts";
import { isObject, stringMap } from "./json-shapes.ts";
import { podImages, type PodImages } from "./pod-images.ts";

export const ADMISSION_API_VERSIONS = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] as const;

export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  resource?: { group?: string; version?: string; resource?: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation?: string;
  userInfo?: { username?: string; uid?: string; groups?: string[] };
  object?: Record<string, unknown> | null;
  oldObject?: Record<string, unknown> | null;
  dryRun?: boolean;
}

export interface ParsedAdmissionReview {
  apiVersion: (typeof ADMISSION_API_VERSIONS)[number];
  request: AdmissionRequest;
}

export type AdmissionParseResult = { ok: true; review: ParsedAdmissionReview } | { ok: false; error: string };

export function parseAdmissionReview(body: unknown): AdmissionParseResult {
  if (!isObject(body)) return { ok: false, error: "body must be a JSON object (an AdmissionReview)" };
  const apiVersion = ADMISSION_API_VERSIONS.find((v) => v === body.apiVersion);
  if (!apiVersion) {
    return { ok: false, error: `apiVersion must be one of ${ADMISSION_API_VERSIONS.join(", ")}, got ${JSON.stringify(body.apiVersion ?? null)}` };
  }
  if (body.kind !== "AdmissionReview") return { ok: false, error: `kind must be "AdmissionReview", got ${JSON.stringify(body.kind ?? null)}` };
  const request = body.request;
  if (!isObject(request)) return { ok: false, error: "request must be an object" };
  if (typeof request.uid !== "string" || request.uid === "") return { ok: false, error: "request.uid must be a non-empty string" };
  for (const key of ["object", "oldObject"] as const) {
    const v = request[key];
    if (v !== undefined && v !== null && !isObject(v)) return { ok: false, error: `request.${key} must be an object` };
  }
  return { ok: true, review: { apiVersion, request: request as unknown as AdmissionRequest } };
}

/** What an admission request asks us to review: nothing (not a Pod, or no image changed) or the pod's images. */
export type PodReviewPlan = { review: false; why: string } | { review: true; images: PodImages; podName: string };

export function planPodReview(req: AdmissionRequest): PodReviewPlan {
  const resource = req.resource?.resource;
  const isPod = (req.resource?.group ?? "") === "" && resource === "pods";
  if (!isPod) return { review: false, why: `not a pod (${resource ?? "unknown resource"})` };
  const sub = req.subResource ?? "";
  if (sub !== "" && sub !== "ephemeralcontainers") return { review: false, why: `subresource ${sub} carries no images` };
  if (req.operation !== "CREATE" && req.operation !== "UPDATE") return { review: false, why: `operation ${req.operation ?? "?"}` };
  const obj = req.object ?? undefined;
  if (!obj) return { review: false, why: "no object" };

  const namespace = req.namespace ?? str((obj.metadata as Record<string, unknown> | undefined)?.namespace) ?? "";
  const metadata = (obj.metadata ?? {}) as Record<string, unknown>;
  const podName = str(metadata.name) ?? req.name ?? str(metadata.generateName) ?? "";
  const annotations = stringMap(metadata.annotations);
  // v1.20-era apiservers send the EphemeralContainers kind for the subresource; later ones send the Pod.
  const isEphemeralKind = req.kind?.kind === "EphemeralContainers";
  const current = isEphemeralKind
    ? podImages(obj, annotations, namespace, "")
    : podImages(obj.spec as Record<string, unknown> | undefined, annotations, namespace);

  if (req.operation === "UPDATE" && req.oldObject) {
    // On update only images that are new or changed are reviewed (the ImagePolicyWebhook design allows
    // either); otherwise a policy change would block unrelated updates such as removing a finalizer.
    const old = isEphemeralKind
      ? podImages(req.oldObject, annotations, namespace, "")
      : podImages(req.oldObject.spec as Record<string, unknown> | undefined, annotations, namespace);
    const before = new Map(old.images.map((i) => [i.field, i.image]));
    const changed = current.images.filter((i) => before.get(i.field) !== i.image);
    if (changed.length === 0) return { review: false, why: "no image changed" };
    return {
      review: true,
      podName,
      images: { images: changed, spec: { ...current.spec, containers: changed.map((i) => ({ image: i.image })) } },
    };
  }
  return { review: true, images: current, podName };
}

export interface AdmissionResponseBody {
  apiVersion: string;
  kind: "AdmissionReview";
  response: {
    uid: string;
    allowed: boolean;
    status?: { code: number; reason?: string; message: string };
    warnings?: string[];
    auditAnnotations?: Record<string, string>;
    patchType?: "JSONPatch";
    /** base64 of the JSON patch document. */
    patch?: string;
  };
}

/** The denial message lists every violation; the apiserver prefixes it with the webhook's name. */
export function admissionResponse(review: ParsedAdmissionReview, decision: Decision): AdmissionResponseBody {
  const response: AdmissionResponseBody["response"] = { uid: review.request.uid, allowed: decision.allowed };
  if (!decision.allowed) {
    response.status = { code: 403, reason: "Forbidden", message: renderReason(decision.violations) };
  }
  if (decision.warnings.length > 0) response.warnings = decision.warnings.map(sanitizeWarning);
  if (Object.keys(decision.auditAnnotations).length > 0) response.auditAnnotations = decision.auditAnnotations;
  if (decision.allowed && decision.patches && decision.patches.length > 0) {
    response.patchType = "JSONPatch";
    response.patch = Buffer.from(JSON.stringify(decision.patches)).toString("base64");
  }
  return { apiVersion: review.apiVersion, kind: "AdmissionReview", response };
}

/** Kubernetes drops warnings with control characters and truncates long ones; keep them printable and short. */
function sanitizeWarning(w: string): string {
  const clean = w.replace(/[\u0000-\u001f\u007f]/g, " ");
  return clean.length > 500 ? `${clean.slice(0, 497)}...` : clean;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}
