// Where a PodSpec names images, with field paths: its container lists and its OCI image volumes. The one
// definition of which fields hold images: image review, pinning, PodRestrictions, `check` and the node proxy
// all read it from here, so a new image field added once is reviewed everywhere.

/** Every PodSpec field that holds containers, in the order images are reviewed and reported. */
export const CONTAINER_LISTS = ["containers", "initContainers", "ephemeralContainers"] as const;
export type ContainerList = (typeof CONTAINER_LISTS)[number];

export interface PodImage {
  image: string;
  /** e.g. "spec.initContainers[0].image" or "spec.volumes[2].image.reference" */
  field: string;
}

/**
 * `podSpec` is a Pod's spec, or — for the `pods/ephemeralcontainers` subresource on v1.20-era apiservers — an
 * object carrying `ephemeralContainers` at the top level (fieldPrefix "").
 *
 * Container images come first, then image volumes (`volumes[].image.reference`, the ImageVolume feature: the
 * kubelet pulls them like container images, with the pod's pull secrets).
 */
export function podImages(podSpec: Record<string, unknown> | undefined, fieldPrefix = "spec."): PodImage[] {
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
  const volumes = podSpec?.volumes;
  if (Array.isArray(volumes)) {
    volumes.forEach((v: unknown, i: number) => {
      const source = typeof v === "object" && v !== null ? (v as Record<string, unknown>).image : undefined;
      if (source === undefined || source === null) return;
      // An image volume whose reference is missing or not a string is reviewed as "" (an invalid reference, a
      // denial): the feature may be off on the apiserver, but a kubelet that has it would still pull it.
      const reference = typeof source === "object" ? (source as Record<string, unknown>).reference : undefined;
      images.push({ image: typeof reference === "string" ? reference : "", field: `${fieldPrefix}volumes[${i}].image.reference` });
    });
  }
  return images;
}
