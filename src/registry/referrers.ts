// OCI 1.1 referrers (distribution-spec "Listing Referrers"): the index a registry answers for
// GET /v2/<name>/referrers/<digest>, or the same index stored at the referrers tag (`sha256-<hex>`) by clients
// of registries without the API. Pure parsing; the requests are in registry-client.ts.
import { digestAlgorithm } from "./content-digest.ts";
import { essence, OCI_IMAGE_INDEX } from "./media-types.ts";

export interface ReferrerDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
}

/** The tag of the referrers tag schema: `<alg>-<hex>`, at most 128 characters. */
export function referrersTag(subjectDigest: string): string {
  return subjectDigest.replace(":", "-").slice(0, 128);
}

/** The descriptors of a referrers index, strictly checked; every problem is one line. */
export function parseReferrersIndex(body: Buffer): { ok: true; descriptors: ReferrerDescriptor[] } | { ok: false; error: string } {
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString("utf8"));
  } catch (e) {
    return { ok: false, error: `the referrers index is not JSON: ${(e as Error).message}` };
  }
  if (typeof doc !== "object" || doc === null || !Array.isArray((doc as { manifests?: unknown }).manifests))
    return { ok: false, error: "the referrers index has no manifests list" };
  const descriptors: ReferrerDescriptor[] = [];
  for (const [i, raw] of (doc as { manifests: unknown[] }).manifests.entries()) {
    const d = raw as Record<string, unknown> | null;
    if (typeof d !== "object" || d === null) return { ok: false, error: `manifests[${i}] is not an object` };
    if (typeof d.mediaType !== "string" || d.mediaType === "") return { ok: false, error: `manifests[${i}].mediaType must be a string` };
    if (typeof d.digest !== "string" || digestAlgorithm(d.digest) === undefined)
      return { ok: false, error: `manifests[${i}].digest is not a sha256 or sha512 digest` };
    if (typeof d.size !== "number" || !Number.isSafeInteger(d.size) || d.size < 0)
      return { ok: false, error: `manifests[${i}].size must be a non-negative integer` };
    if (d.artifactType !== undefined && typeof d.artifactType !== "string") return { ok: false, error: `manifests[${i}].artifactType must be a string` };
    const descriptor: ReferrerDescriptor = { mediaType: d.mediaType, digest: d.digest, size: d.size };
    if (typeof d.artifactType === "string") descriptor.artifactType = d.artifactType;
    if (typeof d.annotations === "object" && d.annotations !== null && !Array.isArray(d.annotations))
      descriptor.annotations = Object.fromEntries(Object.entries(d.annotations).filter((e): e is [string, string] => typeof e[1] === "string"));
    descriptors.push(descriptor);
  }
  return { ok: true, descriptors };
}

/**
 * What a Referrers API answer is: an OCI image index (by its Content-Type, or by its own `mediaType` when the
 * Content-Type is not a manifest type), whose descriptors are then strictly checked; or something else
 * (an HTML page, a JSON error, a manifest), which means the registry has no Referrers API here.
 */
export function readReferrersAnswer(
  body: Buffer,
  contentType: string | undefined,
): { ok: true; descriptors: ReferrerDescriptor[] } | { ok: false; error: string } | { notAnIndex: string } {
  const type = essence(contentType);
  let declared: unknown;
  try {
    declared = (JSON.parse(body.toString("utf8")) as { mediaType?: unknown } | null)?.mediaType;
  } catch {
    if (type !== OCI_IMAGE_INDEX) return { notAnIndex: `a ${type ?? "body without Content-Type"} that is not JSON` };
  }
  const isIndex = type === OCI_IMAGE_INDEX ? declared === undefined || declared === OCI_IMAGE_INDEX : declared === OCI_IMAGE_INDEX;
  if (!isIndex) return { notAnIndex: `${type ?? "no Content-Type"}${typeof declared === "string" ? ` declaring ${declared}` : ""}, not an OCI image index` };
  return parseReferrersIndex(body);
}

export type NextPage = { path: string } | { refused: string };

/**
 * The next page of a paginated answer (`Link: <…>; rel="next"`), as a path below /v2/<name>/. A relative link
 * resolves against `answered` (the URL that answered); an absolute one is followed only to the same origin
 * (scheme, host and port) and repository, so a registry cannot send the client (and its credentials) elsewhere; a
 * path with an encoded slash, backslash or dot is refused, since a registry decoding it may read another repository.
 */
export function nextPage(link: string | undefined, repository: string, answered: URL): NextPage | undefined {
  if (!link) return undefined;
  const m = /<([^>]+)>\s*;\s*rel="?next"?/.exec(link);
  if (!m) return undefined;
  let next: URL;
  try {
    next = new URL(m[1]!, answered);
  } catch {
    return { refused: `the next page ${JSON.stringify(m[1])} is not a URL` };
  }
  if (next.origin !== answered.origin) return { refused: `the next page is on another host (${next.origin}); only ${answered.origin} is followed` };
  const prefix = `/v2/${repository}/`;
  if (!next.pathname.startsWith(prefix)) return { refused: `the next page ${next.pathname} is outside ${prefix}` };
  // A slash, backslash or dot in percent-encoding: a registry that decodes the path may read another repository.
  if (/%(2f|5c|2e)/i.test(next.pathname)) return { refused: `the next page ${next.pathname} hides a path separator or dot in percent-encoding` };
  return { path: next.pathname.slice(prefix.length) + next.search };
}
