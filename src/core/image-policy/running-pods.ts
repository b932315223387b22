// What a running pod runs, as its status says: the post-creation audit judges the digest each container actually
// runs (status.*containerStatuses[].imageID, filled in by the kubelet from the container runtime), not only the
// reference the spec names, which may be a tag that has moved since admission. Pure.
//
// The pod is judged as if it were created with each image pinned to its running digest (`repo:tag@sha256:…`): tag
// rules still match, digestVerify is met by what really runs, and signatures are verified on that digest (so a
// scan of many pods of few images verifies each image once). Differences between the running digest and what the
// spec or admission's records name are findings of their own.
import { checkDigest, parseImageReferenceCached } from "../image-reference.ts";
import { asObject } from "../primitives/json-shapes.ts";
import { PINNED_IMAGES_ANNOTATION } from "./digest-pinning.ts";
import { VERIFIED_IMAGES_ANNOTATION } from "./image-verification.ts";

/** Where the kubelet reports each kind of container, and where the spec names it. */
const CONTAINER_LISTS = [
  { spec: "containers", status: "containerStatuses" },
  { spec: "initContainers", status: "initContainerStatuses" },
  { spec: "ephemeralContainers", status: "ephemeralContainerStatuses" },
] as const;

export interface RunningImage {
  /** The spec's field: "spec.containers[0].image". */
  field: string;
  container: string;
  /** As the spec writes it. */
  image: string;
  /** The kubelet's report, as given ("docker.io/library/nginx@sha256:…", "docker-pullable://…"). */
  imageID: string;
  /** The manifest digest in imageID; undefined when imageID names none (an image ID such as a bare config digest). */
  digest?: string;
}

/** A difference between what runs and what the spec or admission named. */
export interface DigestDrift {
  field: string;
  image: string;
  running: string;
  /** The digest the spec pins, or the one admission verified or pinned. */
  expected: string;
  source: "spec" | "verified-images" | "pinned-images";
}

/**
 * The manifest digest a container status's imageID names. The kubelet writes what the runtime reports: containerd
 * gives the repo digest ("docker.io/library/nginx@sha256:…"), dockershim prefixes it ("docker-pullable://…"). A
 * bare "sha256:…" is the image's own ID (its config digest), not something a registry serves by that name: no digest.
 */
export function digestOfImageId(imageID: string): string | undefined {
  const withoutScheme = imageID.replace(/^[a-z-]+:\/\//, "");
  const at = withoutScheme.lastIndexOf("@");
  if (at < 0) return undefined;
  const digest = withoutScheme.slice(at + 1);
  return checkDigest(digest) === undefined ? digest : undefined;
}

/** Every container the status reports with an imageID, matched to its spec entry by name. */
export function runningImages(pod: Record<string, unknown>): RunningImage[] {
  const spec = asObject(pod.spec);
  const status = asObject(pod.status);
  if (!spec || !status) return [];
  const out: RunningImage[] = [];
  for (const list of CONTAINER_LISTS) {
    const containers = Array.isArray(spec[list.spec]) ? (spec[list.spec] as unknown[]) : [];
    const statuses = Array.isArray(status[list.status]) ? (status[list.status] as unknown[]) : [];
    const imageIdByName = new Map<string, string>();
    for (const s of statuses) {
      const st = asObject(s);
      if (typeof st?.name === "string" && typeof st.imageID === "string" && st.imageID !== "") imageIdByName.set(st.name, st.imageID);
    }
    containers.forEach((c, i) => {
      const container = asObject(c);
      const name = container?.name;
      const image = container?.image;
      if (typeof name !== "string" || typeof image !== "string") return;
      const imageID = imageIdByName.get(name);
      if (imageID === undefined) return;
      const digest = digestOfImageId(imageID);
      out.push({ field: `spec.${list.spec}[${i}].image`, container: name, image, imageID, ...(digest ? { digest } : {}) });
    });
  }
  return out;
}

/**
 * The pod as it runs: each container's image carries its running digest (the tag is kept, so rules on tags still
 * apply). A spec image that pins another digest is left as written: the drift is reported apart.
 */
export function podAsRunning(pod: Record<string, unknown>, running: readonly RunningImage[]): Record<string, unknown> {
  if (running.length === 0) return pod;
  const spec = { ...asObject(pod.spec) };
  for (const r of running) {
    if (!r.digest) continue;
    const ref = parseImageReferenceCached(r.image);
    if (!ref.ok || ref.ref.digest) continue;
    const match = /^spec\.(\w+)\[(\d+)\]\.image$/.exec(r.field);
    if (!match) continue;
    const list = [...((spec[match[1]!] as unknown[] | undefined) ?? [])];
    list[Number(match[2])] = { ...asObject(list[Number(match[2])]), image: `${r.image}@${r.digest}` };
    spec[match[1]!] = list;
  }
  return { ...pod, spec };
}

/**
 * Running digests that differ from the digest the spec pins, or from what admission recorded having verified or
 * pinned for that image (`imprimatur.dev/verified-images`, `imprimatur.dev/pinned-images`). The records are the
 * object's own annotations, so they prove nothing: they only point at a pod that changed under admission's eyes.
 */
export function digestDrift(pod: Record<string, unknown>, running: readonly RunningImage[]): DigestDrift[] {
  const annotations = asObject(asObject(pod.metadata)?.annotations) ?? {};
  const verified = recordedDigests(annotations[VERIFIED_IMAGES_ANNOTATION], (v) => asObject(v)?.digest);
  const pinned = recordedDigests(annotations[PINNED_IMAGES_ANNOTATION], (v) => (typeof v === "string" ? digestOfImageId(v) : undefined));
  const drift: DigestDrift[] = [];
  for (const r of running) {
    if (!r.digest) continue;
    const ref = parseImageReferenceCached(r.image);
    const fromSpec = ref.ok ? ref.ref.digest : undefined;
    const expected: Array<[string | undefined, DigestDrift["source"]]> = [
      [fromSpec, "spec"],
      [verified.get(r.image), "verified-images"],
      [pinned.get(r.image), "pinned-images"],
    ];
    for (const [digest, source] of expected) {
      if (digest !== undefined && digest !== r.digest) {
        drift.push({ field: r.field, image: r.image, running: r.digest, expected: digest, source });
        break;
      }
    }
  }
  return drift;
}

/** image → digest from a JSON record annotation; a malformed one gives nothing (it is informational). */
function recordedDigests(value: unknown, digestOf: (entry: unknown) => unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (typeof value !== "string") return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return out;
  }
  for (const [image, entry] of Object.entries(asObject(parsed) ?? {})) {
    const digest = digestOf(entry);
    if (typeof digest === "string" && checkDigest(digest) === undefined) out.set(image, digest);
  }
  return out;
}
