// Manifest media types the client asks for, and reading what came back. Pure: no I/O.

export const OCI_IMAGE_INDEX = "application/vnd.oci.image.index.v1+json";
export const OCI_IMAGE_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json";
export const DOCKER_MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json";

/**
 * Sent as Accept on manifest requests. A registry picks one of these, and without them some (Docker Hub)
 * would convert to the legacy schema 1, whose digest is not the image's.
 */
export const MANIFEST_ACCEPT = [OCI_IMAGE_INDEX, OCI_IMAGE_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST_V2].join(", ");

const INDEX_TYPES = new Set([OCI_IMAGE_INDEX, DOCKER_MANIFEST_LIST]);
const MANIFEST_TYPES = new Set([OCI_IMAGE_INDEX, OCI_IMAGE_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST_V2]);

/** A multi-platform image: OCI image index or Docker manifest list. */
export function isIndexMediaType(mediaType: string): boolean {
  return INDEX_TYPES.has(mediaType);
}

function isManifestMediaType(mediaType: string): boolean {
  return MANIFEST_TYPES.has(mediaType);
}

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
  "os.version"?: string;
}

/** One entry of an index: a manifest callers fetch by digest. */
export interface PlatformManifest {
  digest: string;
  mediaType: string;
  size: number;
  /** Absent for entries that are not images of a platform (some indexes also list attestations). */
  platform?: Platform;
}

/** "application/json; charset=utf-8" → "application/json"; undefined/empty → undefined. */
export function essence(contentType: string | undefined): string | undefined {
  const value = contentType?.split(";")[0]?.trim().toLowerCase();
  return value ? value : undefined;
}

export type ManifestReadResult = { ok: true; mediaType: string; manifests?: PlatformManifest[] } | { ok: false; error: string };

/**
 * The media type of a manifest body and, for an index, its entries. The type is the Content-Type if it is a
 * manifest type, else the body's own `mediaType` field; when both are present they must agree, so a body
 * cannot be served as one kind and read as another.
 */
export function readManifest(body: Buffer, contentType: string | undefined): ManifestReadResult {
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return { ok: false, error: "the manifest is not valid JSON" };
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return { ok: false, error: "the manifest is not a JSON object" };
  const doc = json as Record<string, unknown>;
  const declared = typeof doc.mediaType === "string" ? doc.mediaType : undefined;
  const header = essence(contentType);
  const headerIsManifest = header !== undefined && isManifestMediaType(header);

  let mediaType: string;
  if (headerIsManifest && declared !== undefined && declared !== header) {
    return { ok: false, error: `the Content-Type is ${header} but the manifest says it is ${declared}` };
  } else if (headerIsManifest) {
    mediaType = header;
  } else if (declared !== undefined && isManifestMediaType(declared)) {
    mediaType = declared;
  } else if (declared === undefined && Array.isArray(doc.manifests)) {
    mediaType = OCI_IMAGE_INDEX; // OCI allows an index without mediaType
  } else if (declared === undefined && typeof doc.config === "object" && doc.config !== null) {
    mediaType = OCI_IMAGE_MANIFEST;
  } else {
    return { ok: false, error: `unsupported manifest media type ${JSON.stringify(declared ?? header ?? "(none)")}` };
  }
  if (!isIndexMediaType(mediaType)) return { ok: true, mediaType };

  if (!Array.isArray(doc.manifests)) return { ok: false, error: `the ${mediaType} has no "manifests" list` };
  const manifests: PlatformManifest[] = [];
  for (const [i, raw] of (doc.manifests as unknown[]).entries()) {
    const entry = readIndexEntry(raw);
    if (typeof entry === "string") return { ok: false, error: `manifests[${i}]: ${entry}` };
    manifests.push(entry);
  }
  return { ok: true, mediaType, manifests };
}

function readIndexEntry(raw: unknown): PlatformManifest | string {
  if (typeof raw !== "object" || raw === null) return "not an object";
  const e = raw as Record<string, unknown>;
  if (typeof e.digest !== "string" || !/^sha(256:[0-9a-f]{64}|512:[0-9a-f]{128})$/.test(e.digest)) return "digest is missing or not sha256/sha512";
  if (typeof e.mediaType !== "string") return "mediaType is missing";
  if (!Number.isSafeInteger(e.size) || (e.size as number) < 0) return "size is missing or not a non-negative integer";
  const entry: PlatformManifest = { digest: e.digest, mediaType: e.mediaType, size: e.size as number };
  if (e.platform !== undefined) {
    const p = e.platform as Record<string, unknown>;
    if (typeof p !== "object" || p === null || typeof p.os !== "string" || typeof p.architecture !== "string") {
      return "platform must have os and architecture strings";
    }
    const platform: Platform = { os: p.os, architecture: p.architecture };
    if (typeof p.variant === "string") platform.variant = p.variant;
    if (typeof p["os.version"] === "string") platform["os.version"] = p["os.version"];
    entry.platform = platform;
  }
  return entry;
}
