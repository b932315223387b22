// The container lists of a PodSpec and the images they ask to run, with field paths. The one definition of
// which lists hold containers: image review, pinning and PodRestrictions all read it from here.

/** Every PodSpec field that holds containers, in the order images are reviewed and reported. */
export const CONTAINER_LISTS = ["containers", "initContainers", "ephemeralContainers"] as const;
export type ContainerList = (typeof CONTAINER_LISTS)[number];

export interface PodImage {
  image: string;
  /** e.g. "spec.initContainers[0].image" */
  field: string;
}

/**
 * `podSpec` is a Pod's spec, or — for the `pods/ephemeralcontainers` subresource on v1.20-era apiservers — an
 * object carrying `ephemeralContainers` at the top level (fieldPrefix "").
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
  return images;
}
