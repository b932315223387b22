// The ImageReview wire format of kube-apiserver's ImagePolicyWebhook (imagepolicy.k8s.io/v1alpha1).
import { quotedValue } from "./primitives/quoted-value.ts";
import { isObject } from "./primitives/json-shapes.ts";

export const IMAGE_REVIEW_API_VERSION = "imagepolicy.k8s.io/v1alpha1";
export const IMAGE_REVIEW_KIND = "ImageReview";

export interface ImageReviewContainerSpec {
  image: string;
}

export interface ImageReviewSpec {
  containers: ImageReviewContainerSpec[];
  /** Only keys matching `*.image-policy.k8s.io/*`. */
  annotations?: Record<string, string>;
  namespace?: string;
}

export interface ImageReviewStatus {
  allowed: boolean;
  reason?: string;
  auditAnnotations?: Record<string, string>;
}

export interface ImageReview {
  apiVersion: string;
  kind: string;
  metadata?: Record<string, unknown>;
  spec: ImageReviewSpec;
  status?: ImageReviewStatus;
}

/** `<anything>.image-policy.k8s.io/<name>`: the annotations the ImagePolicyWebhook passes to backends. */
export function isImagePolicyAnnotation(key: string): boolean {
  const slash = key.indexOf("/");
  if (slash <= 0 || slash === key.length - 1) return false;
  const prefix = key.slice(0, slash);
  return prefix.endsWith(".image-policy.k8s.io") && prefix.length > ".image-policy.k8s.io".length;
}

export function imagePolicyAnnotations(annotations: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(annotations ?? {})) {
    if (isImagePolicyAnnotation(k)) out[k] = v;
  }
  return out;
}

export type ParsedImageReview = { ok: true; review: ImageReview } | { ok: false; error: string };

/** Validates an incoming ImageReview; the error says exactly what is wrong, for a 400 answer. */
export function parseImageReview(body: unknown): ParsedImageReview {
  if (!isObject(body)) return { ok: false, error: "body must be a JSON object (an ImageReview)" };
  if (body.apiVersion !== IMAGE_REVIEW_API_VERSION) {
    return { ok: false, error: `apiVersion must be ${JSON.stringify(IMAGE_REVIEW_API_VERSION)}, got ${quotedValue(body.apiVersion ?? null)}` };
  }
  if (body.kind !== IMAGE_REVIEW_KIND) {
    return { ok: false, error: `kind must be "ImageReview", got ${quotedValue(body.kind ?? null)}` };
  }
  const spec = body.spec;
  if (!isObject(spec)) return { ok: false, error: "spec must be an object" };
  const containers = spec.containers ?? [];
  if (!Array.isArray(containers)) return { ok: false, error: "spec.containers must be a list" };
  const parsedContainers: ImageReviewContainerSpec[] = [];
  for (const [i, c] of containers.entries()) {
    if (!isObject(c) || typeof c.image !== "string") {
      return { ok: false, error: `spec.containers[${i}].image must be a string` };
    }
    parsedContainers.push({ image: c.image });
  }
  const annotations = spec.annotations ?? {};
  if (!isObject(annotations) || Object.values(annotations).some((v) => typeof v !== "string")) {
    return { ok: false, error: "spec.annotations must be a map of strings" };
  }
  if (spec.namespace !== undefined && typeof spec.namespace !== "string") {
    return { ok: false, error: "spec.namespace must be a string" };
  }
  return {
    ok: true,
    review: {
      apiVersion: IMAGE_REVIEW_API_VERSION,
      kind: IMAGE_REVIEW_KIND,
      ...(isObject(body.metadata) ? { metadata: body.metadata } : {}),
      spec: {
        containers: parsedContainers,
        annotations: annotations as Record<string, string>,
        namespace: (spec.namespace as string | undefined) ?? "",
      },
    },
  };
}

/** A stable string for a spec, independent of key order: the decision cache key. */
export function canonicalSpecKey(spec: ImageReviewSpec): string {
  const annotations = Object.entries(spec.annotations ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify([spec.namespace ?? "", spec.containers.map((c) => c.image), annotations]);
}
