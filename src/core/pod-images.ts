// Which images a Pod (or its ephemeral-containers subresource) asks to run, with their field paths,
// and the ImageReview spec built from them exactly as the ImagePolicyWebhook plugin does.
import { imagePolicyAnnotations, type ImageReviewSpec } from "./image-review.ts";

export interface PodImage {
  image: string;
  /** e.g. "spec.initContainers[0].image" */
  field: string;
}

export interface PodImages {
  images: PodImage[];
  spec: ImageReviewSpec;
}

const CONTAINER_LISTS = ["containers", "initContainers", "ephemeralContainers"] as const;

/**
 * `podSpec` is a Pod's spec, or — for the `pods/ephemeralcontainers` subresource on v1.20-era apiservers — the
 * EphemeralContainers object, which carries `ephemeralContainers` at the top level (fieldPrefix "").
 */
export function podImages(
  podSpec: Record<string, unknown> | undefined,
  annotations: Record<string, string> | undefined,
  namespace: string,
  fieldPrefix = "spec.",
): PodImages {
  const images: PodImage[] = [];
  for (const list of CONTAINER_LISTS) {
    const containers = podSpec?.[list];
    if (!Array.isArray(containers)) continue;
    containers.forEach((c: unknown, i: number) => {
      const image = typeof c === "object" && c !== null ? (c as Record<string, unknown>).image : undefined;
      // A container without an image is left to the apiserver's own validation; an empty string is
      // still reviewed so it is denied as an invalid reference rather than slipping through.
      images.push({ image: typeof image === "string" ? image : "", field: `${fieldPrefix}${list}[${i}].image` });
    });
  }
  return {
    images,
    spec: {
      containers: images.map((i) => ({ image: i.image })),
      annotations: imagePolicyAnnotations(annotations),
      namespace,
    },
  };
}
