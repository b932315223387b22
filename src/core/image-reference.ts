// The project's one image-reference grammar: Docker/OCI references as published by the
// distribution/reference grammar, normalized the way `docker` and the kubelet normalize them.
// Pure: no I/O, never throws.
//
//   reference  := name [ ":" tag ] [ "@" digest ]
//   name       := [ registry "/" ] path
//   registry   := host [ ":" port ]               host: domain name, IPv4, or "[" IPv6 "]"
//   path       := component ( "/" component )*    at most 255 characters with the registry
//   component  := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
//   tag        := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
//   digest     := "sha256:" 64 hex | "sha512:" 128 hex   (lowercase hex)
//
// Normalization:
// - The first path component is a registry only if it contains "." or ":" or is "localhost";
//   otherwise the image is on Docker Hub ("docker.io"). A name without "/" is always on Docker Hub,
//   so "localhost:5000" alone is docker.io/library/localhost with tag "5000", as in Docker.
// - "index.docker.io" (the legacy Hub name) becomes "docker.io"; other hosts stay as written,
//   lowercased (host names are case-insensitive, and policies must not be dodged by "REGISTRY.io").
// - A single-component Docker Hub path gets "library/" (official images): "nginx" → "library/nginx".
// - Deliberate difference from Docker: Docker treats an uppercase first component ("Foo/bar") as a
//   registry; here it is a Docker Hub path and therefore rejected as not lowercase.

export interface ImageReference {
  /** Normalized host[:port]: "docker.io", "registry.example.com:5000", "[::1]:5000". */
  registry: string;
  /** Repository path: "library/nginx", "org/team/app". */
  repository: string;
  /** Explicit tag only; undefined when absent (the implicit "latest" is not stored). */
  tag?: string;
  /** "sha256:<64 hex>" or "sha512:<128 hex>". */
  digest?: string;
}

export type ParseResult = { ok: true; ref: ImageReference } | { ok: false; error: string };

// Docker Hub goes by three names; this file is the one place that knows them.
/** Docker Hub as image references name it, and the registry of a name without one. */
export const DOCKER_HUB = "docker.io";
/** Docker Hub's legacy name: references normalize it to "docker.io"; docker login writes its credentials under it. */
export const DOCKER_HUB_LEGACY_HOST = "index.docker.io";
/** Where Docker Hub's registry API is served: the host contacted for docker.io images. */
export const DOCKER_HUB_API_HOST = "registry-1.docker.io";
const OFFICIAL_PREFIX = "library/";
const MAX_NAME_LENGTH = 255;
const MAX_TAG_LENGTH = 128;
// A Map, not an object literal, so that "constructor" or "__proto__" is not a known algorithm.
const DIGEST_HEX_LENGTH = new Map([
  ["sha256", 64],
  ["sha512", 128],
]);

const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_NAME = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/i;
const IPV6_BRACKETED = /^\[[0-9a-f:]*:[0-9a-f:]*\]$/i;
const TAG = /^\w[\w.-]*$/; // \w without the u flag is ASCII [A-Za-z0-9_], as in Go
const WHITESPACE_OR_CONTROL = /[\s\x00-\x1f\x7f]/;
// Docker refuses a bare 64-hex name: it is an image ID, and reading it as docker.io/library/<hex> would mislead.
const IMAGE_ID = /^[a-f0-9]{64}$/;

const q = (s: string): string => JSON.stringify(s);

export function parseImageReference(input: string): ParseResult {
  const result = checkImageReference(input);
  if (result.ok) return result;
  return { ok: false, error: `invalid image reference ${q(shown(input))}: ${result.reason}` };
}

/** A value as an error quotes it. Not String() of an object: one without a prototype has no string form, and a deeply nested array overflows the stack. */
function shown(input: unknown): string {
  if (typeof input === "object" && input !== null) return Object.prototype.toString.call(input);
  return String(input);
}

/**
 * parseImageReference with the bare reason on failure, for callers that word their own error
 * (image patterns say "invalid image pattern …").
 */
export function checkImageReference(input: string): { ok: true; ref: ImageReference } | { ok: false; reason: string } {
  const fail = (reason: string) => ({ ok: false as const, reason });
  if (typeof input !== "string") return fail("must be a string");
  if (input === "") return fail("must not be empty");
  if (WHITESPACE_OR_CONTROL.test(input)) return fail("must not contain whitespace or control characters");
  if (IMAGE_ID.test(input)) {
    return fail("a bare 64-character hex string is an image ID, not a reference; pin a digest as name@sha256:<hex>");
  }

  let name = input;
  let digest: string | undefined;
  const at = input.indexOf("@");
  if (at >= 0) {
    if (input.includes("@", at + 1)) return fail('contains more than one "@"');
    name = input.slice(0, at);
    digest = input.slice(at + 1);
    if (digest === "") return fail('ends with "@" but has no digest');
    const problem = checkDigest(digest);
    if (problem) return fail(problem);
    if (name === "") return fail('has no repository name before "@"');
  }

  const { registry, rest, explicit } = splitRegistry(name);
  if (explicit) {
    const problem = checkRegistry(registry);
    if (problem) return fail(problem);
  }

  // Registry ports are already split off, so any ":" left separates the tag.
  let path = rest;
  let tag: string | undefined;
  const colon = rest.indexOf(":");
  if (colon >= 0) {
    if (rest.includes(":", colon + 1)) return fail('contains more than one ":" after the registry; a tag is written once, after the repository');
    path = rest.slice(0, colon);
    tag = rest.slice(colon + 1);
  }

  if (path === "") return fail(explicit ? "has no repository path after the registry" : "has no repository name");
  if (path !== path.toLowerCase()) return fail("repository name must be lowercase");
  for (const component of path.split("/")) {
    const problem = checkPathComponent(component);
    if (problem) return fail(problem);
  }

  if (tag !== undefined) {
    if (tag === "") return fail(digest === undefined ? 'ends with ":" but has no tag' : 'has an empty tag before "@"');
    const problem = checkTag(tag);
    if (problem) return fail(problem);
  }

  const repository = withOfficialPrefix(registry, path);
  const nameLength = registry.length + 1 + repository.length;
  if (nameLength > MAX_NAME_LENGTH) {
    return fail(`repository name (with registry) is ${nameLength} characters long; the limit is ${MAX_NAME_LENGTH}`);
  }

  const ref: ImageReference = { registry, repository };
  if (tag !== undefined) ref.tag = tag;
  if (digest !== undefined) ref.digest = digest;
  return { ok: true, ref };
}

/**
 * Docker's registry split of a name (no tag or digest needed): the first "/"-separated component
 * is the registry if it contains "." or ":" or is "localhost", else the name is on Docker Hub.
 * The registry is lowercased and "index.docker.io" becomes "docker.io". Shared with image patterns
 * so that both read names the same way; does not validate.
 */
export function splitRegistry(name: string): { registry: string; rest: string; explicit: boolean } {
  const slash = name.indexOf("/");
  const first = name.slice(0, Math.max(slash, 0));
  if (slash < 0 || !(first.includes(".") || first.includes(":") || first === "localhost")) {
    return { registry: DOCKER_HUB, rest: name, explicit: false };
  }
  return { registry: canonicalRegistryHost(first), rest: name.slice(slash + 1), explicit: true };
}

/** A registry host as references name it: lowercased (host names are case-insensitive), "index.docker.io" as "docker.io". */
export function canonicalRegistryHost(host: string): string {
  const lower = host.toLowerCase();
  return lower === DOCKER_HUB_LEGACY_HOST ? DOCKER_HUB : lower;
}

/** The host that serves a registry's API: itself, except Docker Hub's (an already canonical host). */
export function registryApiHost(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_API_HOST : registry;
}

/** Docker Hub's official images live under "library/": "nginx" is "library/nginx". */
export function withOfficialPrefix(registry: string, path: string): string {
  return registry === DOCKER_HUB && !path.includes("/") ? OFFICIAL_PREFIX + path : path;
}

/** Why a digest ("sha256:<hex>") is invalid, or undefined if it is valid. */
export function checkDigest(digest: string): string | undefined {
  const colon = digest.indexOf(":");
  if (colon <= 0) return `digest ${q(digest)} must be written as algorithm:hex, e.g. sha256:<64 hex characters>`;
  const algorithm = digest.slice(0, colon);
  const hex = digest.slice(colon + 1);
  const length = DIGEST_HEX_LENGTH.get(algorithm);
  if (length === undefined) return `unsupported digest algorithm ${q(algorithm)}; use sha256 or sha512`;
  if (!/^[0-9a-f]*$/.test(hex)) return `${algorithm} digest must be lowercase hexadecimal (0-9, a-f)`;
  if (hex.length !== length) return `${algorithm} digest must have ${length} hex characters, not ${hex.length}`;
  return undefined;
}

function checkRegistry(registry: string): string | undefined {
  let host = registry;
  let port: string | undefined;
  if (registry.startsWith("[")) {
    const end = registry.indexOf("]");
    host = end < 0 ? registry : registry.slice(0, end + 1);
    const after = end < 0 ? "" : registry.slice(end + 1);
    if (!IPV6_BRACKETED.test(host)) return `registry host ${q(host)} is not a bracketed IPv6 address like [::1]`;
    if (after !== "") {
      if (!after.startsWith(":")) return `registry ${q(registry)} has text after the IPv6 address that is not a port`;
      port = after.slice(1);
    }
  } else {
    const colon = registry.indexOf(":");
    if (colon >= 0) {
      host = registry.slice(0, colon);
      port = registry.slice(colon + 1);
    }
    if (!DOMAIN_NAME.test(host)) return `registry host ${q(host)} is not a valid host name or IP address`;
  }
  if (port !== undefined && !(/^[0-9]{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535)) {
    return `registry port ${q(port)} must be a number from 1 to 65535`;
  }
  return undefined;
}

function checkPathComponent(component: string): string | undefined {
  if (component === "") return 'repository path has an empty component (a leading, trailing or doubled "/")';
  if (PATH_COMPONENT.test(component)) return undefined;
  const bad = /[^a-z0-9._-]/.exec(component);
  if (bad) return `repository path component ${q(component)} contains ${q(bad[0])}; only lowercase letters, digits, ".", "_" and "-" are allowed`;
  if (!/^[a-z0-9]/.test(component) || !/[a-z0-9]$/.test(component)) {
    return `repository path component ${q(component)} must start and end with a lowercase letter or digit`;
  }
  return `repository path component ${q(component)} has an invalid separator; use ".", "_", "__" or a run of "-"`;
}

function checkTag(tag: string): string | undefined {
  if (tag.length > MAX_TAG_LENGTH) return `tag is ${tag.length} characters long; the limit is ${MAX_TAG_LENGTH}`;
  if (TAG.test(tag)) return undefined;
  if (!/^\w/.test(tag)) return `tag ${q(tag)} must start with a letter, digit or "_"`;
  return `tag ${q(tag)} may contain only letters, digits, "_", "." and "-"`;
}

/** The tag an image resolves to: its explicit tag, or "latest" when it has neither tag nor digest. */
export function effectiveTag(ref: ImageReference): string | undefined {
  return ref.tag || (ref.digest ? undefined : "latest");
}

function suffix(ref: ImageReference): string {
  const tag = effectiveTag(ref);
  return (tag ? `:${tag}` : "") + (ref.digest ? `@${ref.digest}` : "");
}

/** "docker.io/library/nginx" */
export function repositoryName(ref: ImageReference): string {
  return `${ref.registry}/${ref.repository}`;
}

/** Canonical form: "docker.io/library/nginx:latest"; the implicit tag is added only without tag and digest. */
export function fullName(ref: ImageReference): string {
  return repositoryName(ref) + suffix(ref);
}

/**
 * The short form `docker` shows: "nginx:latest", "org/app:1", "quay.io/x/y@sha256:…". "docker.io/" is
 * elided, and "library/" too when one component remains, so the result parses back to the same reference.
 */
export function familiarName(ref: ImageReference): string {
  let name = repositoryName(ref);
  if (ref.registry === DOCKER_HUB) {
    name = ref.repository;
    const official = name.slice(OFFICIAL_PREFIX.length);
    if (name.startsWith(OFFICIAL_PREFIX) && !official.includes("/")) name = official;
    // A first component that would read as a registry ("a.b/c", "localhost/x") keeps "docker.io/".
    if (splitRegistry(name).explicit) name = repositoryName(ref);
  }
  return name + suffix(ref);
}

// Admission requests repeat the same few images; parsing each once is a measurable share of a review.
// Bounded: cleared when full, so a stream of distinct references cannot grow it without limit.
const PARSE_CACHE_LIMIT = 4096;
const parseCache = new Map<string, ParseResult>();

export function parseImageReferenceCached(image: string): ParseResult {
  let result = parseCache.get(image);
  if (result === undefined) {
    if (parseCache.size >= PARSE_CACHE_LIMIT) parseCache.clear();
    result = parseImageReference(image);
    parseCache.set(image, result);
  }
  return result;
}
