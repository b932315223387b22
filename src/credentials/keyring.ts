// Which credentials apply to an image, decided the way the kubelet's credential keyring decides it
// (kubernetes pkg/credentialprovider/keyring.go), so that Imprimatur resolves a tag with the credentials the
// node will pull it with. Pure.
//
// Keys (as written in a docker config), read as the kubelet's URL parser reads them:
// - a key whose host has characters a URL host cannot have ("^", "\\", spaces…) is ignored; "?" or "#" ends
//   the key's location (a URL query or fragment), so "?.example.com" names no host and is ignored too;
// - "http://" or "https://" is stripped; a path starting "/v1/" or "/v2/" loses that prefix, and a path
//   left as "" or "/" means the whole host: "https://index.docker.io/v1/" → "index.docker.io",
//   "registry.example.com/v2/team" → "registry.example.com/team". The remaining path is kept as written.
// - Keys are indexed once each and sorted in reverse string order, which the kubelet uses to put the more
//   specific key first: "quay.io/team" before "quay.io", "a.example.com" before "*.example.com" ("*" sorts
//   before letters and digits). Every matching key contributes, in that order; credentials under one key
//   keep the order they were added in.
// A key matches an image host[:port]/repository when:
// - the ports are equal (both absent, or the same digits: "registry:443" does not match "registry");
// - the hosts have the same number of dot-separated parts and each key part matches the image's part as a
//   glob (Go's filepath.Match; in a URL host only "*" and classes like "[0-9]" can occur): "*.example.com"
//   matches "a.example.com" but neither "example.com" nor "a.b.example.com"; a malformed glob matches nothing;
// - the key's path is a string prefix of "/" + repository: "quay.io/team" matches "quay.io/team/app" and,
//   as in the kubelet, "quay.io/teamwork/app" too.
// Docker Hub: images normalize to host "docker.io" (src/core/image-reference.ts, as the kubelet's image
// name parser does), so a key "docker.io" matches them directly. A key "index.docker.io" (which is what
// "https://index.docker.io/v1/", docker login's default, becomes) is the kubelet's fallback: it applies to
// Docker Hub images only when no key matched at all.
//
// One deliberate difference: key hosts are lowercased. Image hosts are lowercased by the reference parser,
// and DNS names are case-insensitive, so "Registry.Example.com" still matches "registry.example.com".
import { compileGlob, type GlobMatcher } from "../core/primitives/glob.ts";
import { DOCKER_HUB, DOCKER_HUB_LEGACY_HOST } from "../core/image-reference.ts";
import type { CredentialLookup, RegistryCredential } from "./credential.ts";

/** The kubelet's Docker Hub fallback key (see above). */
const DOCKER_HUB_FALLBACK_KEY = DOCKER_HUB_LEGACY_HOST;

interface Location {
  /** Dot-separated host parts (one part for an IPv6 literal). */
  parts: string[];
  /** Digits, or "" when absent. */
  port: string;
  /** "" or "/…". */
  path: string;
}

interface IndexedKey extends Location {
  /** The normalized key: host[:port][path]. */
  key: string;
  globs: GlobMatcher[];
  credentials: RegistryCredential[];
}

export class CredentialKeyring {
  private readonly index: IndexedKey[];
  private readonly count: number;
  /** Keys that are no registry location, with their source; never matched. */
  readonly ignoredKeys: readonly string[];

  private constructor(index: IndexedKey[], count: number, ignoredKeys: string[]) {
    this.index = index;
    this.count = count;
    this.ignoredKeys = Object.freeze(ignoredKeys);
  }

  static of(entries: ReadonlyArray<{ key: string; credential: RegistryCredential }>): CredentialKeyring {
    const byKey = new Map<string, IndexedKey>();
    const ignored: string[] = [];
    let count = 0;
    for (const { key, credential } of entries) {
      const location = normalizeKey(key);
      if (location === undefined) {
        ignored.push(`${credential.source}: ${JSON.stringify(key)}`);
        continue;
      }
      const normalized = location.key;
      let indexed = byKey.get(normalized);
      if (indexed === undefined) {
        indexed = { ...location, globs: location.parts.map(hostPartGlob), credentials: [] };
        byKey.set(normalized, indexed);
      }
      indexed.credentials.push(credential);
      count++;
    }
    // Reverse string order (code units; keys are ASCII in practice, where this equals Go's byte order).
    const index = [...byKey.values()].sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
    return new CredentialKeyring(index, count, ignored);
  }

  /**
   * Credentials for `host/repository`, most specific key first; [] when none match. Bound, so it can be passed
   * on as a CredentialLookup.
   */
  readonly lookup: CredentialLookup = (host, repository) => {
    const target = splitHostPort(host.toLowerCase());
    const parts = target.host.split(".");
    const path = `/${repository}`;
    const found: RegistryCredential[] = [];
    for (const key of this.index) {
      if (key.port !== target.port || key.parts.length !== parts.length || !path.startsWith(key.path)) continue;
      if (key.globs.every((glob, i) => glob(parts[i] ?? ""))) found.push(...key.credentials);
    }
    if (found.length === 0 && target.host === DOCKER_HUB && target.port === "") {
      const fallback = this.index.find((k) => k.key === DOCKER_HUB_FALLBACK_KEY);
      if (fallback) found.push(...fallback.credentials);
    }
    return found;
  };

  /** How many credentials the keyring holds (entries with an ignored key not counted). */
  get size(): number {
    return this.count;
  }
}

/**
 * Pod secrets first, then the service account's, then the static ones: concatenated, duplicates (same source+key)
 * removed. A duplicate is the same credential from the same source — e.g. a secret listed by both the pod and its
 * service account — which is worth trying once.
 */
export function chainLookups(...lookups: CredentialLookup[]): CredentialLookup {
  return (host, repository) => {
    const seen = new Set<string>();
    const result: RegistryCredential[] = [];
    for (const lookup of lookups) {
      for (const credential of lookup(host, repository)) {
        const identity = JSON.stringify([credential.source, credential.username, credential.password, credential.identityToken, credential.registryToken]);
        if (seen.has(identity)) continue;
        seen.add(identity);
        result.push(credential);
      }
    }
    return result;
  };
}

// ---------------------------------------------------------------------------------------------
// Keys

// What Go's URL parser (which the kubelet runs every key through) accepts in a host: unreserved characters,
// sub-delims, ":" for the port, "[" "]" for IPv6, and "<" ">" '"'. A key with anything else is dropped there.
const URL_HOST = /^[A-Za-z0-9\-_.~!$&'()*+,;=:[\]<>"]+$/;
const BRACKETED_HOST = /^\[[^\]]*\](?::\d*)?$/;

/** A key as a location, or undefined where the kubelet's URL parser would reject it or find no host. */
function normalizeKey(raw: string): (Location & { key: string }) | undefined {
  let rest = raw.replace(/^https?:\/\//i, "");
  // As a URL parser would: a query or fragment is not part of the path.
  rest = rest.replace(/[?#].*$/s, "");
  const slash = rest.indexOf("/");
  let authority = slash < 0 ? rest : rest.slice(0, slash);
  authority = authority.slice(authority.lastIndexOf("@") + 1); // user info is not part of the host
  let path = slash < 0 ? "" : rest.slice(slash);
  if (path.startsWith("/v1/") || path.startsWith("/v2/")) path = path.slice(3);
  if (path === "/") path = "";
  const hostPort = authority.toLowerCase();
  if (!URL_HOST.test(hostPort) || !hasNumericPort(hostPort)) return undefined;
  const { host, port } = splitHostPort(hostPort);
  if (host === "") return undefined;
  return { key: hostPort + path, parts: host.split("."), port, path };
}

/** As Go's URL parser checks it: a port, if any, is digits; "[…]" (IPv6) may be followed only by a port. */
function hasNumericPort(hostPort: string): boolean {
  if (hostPort.startsWith("[")) return BRACKETED_HOST.test(hostPort);
  const colon = hostPort.lastIndexOf(":");
  return colon < 0 || /^\d*$/.test(hostPort.slice(colon + 1));
}

/**
 * Host and port as Go's net.SplitHostPort gives them, falling back (as the kubelet does) to the whole string
 * and no port when there is no port to split off: "[::1]:5000" → "::1" + "5000", "[::1]" → "[::1]" + "".
 */
function splitHostPort(hostPort: string): { host: string; port: string } {
  if (hostPort.startsWith("[")) {
    const close = hostPort.indexOf("]");
    if (close > 0 && hostPort[close + 1] === ":") return { host: hostPort.slice(1, close), port: hostPort.slice(close + 2) };
    return { host: hostPort, port: "" };
  }
  const colon = hostPort.indexOf(":");
  if (colon < 0 || hostPort.indexOf(":", colon + 1) >= 0) return { host: hostPort, port: "" };
  return { host: hostPort.slice(0, colon), port: hostPort.slice(colon + 1) };
}

// ---------------------------------------------------------------------------------------------
// Globs: Go's filepath.Match, one host part at a time. Only what a URL host can carry is reachable: "*" and
// classes "[a-z0-9]" (the parser rejects "?", "^" and "\\" in a host, so no "?", negation or escapes).
// A malformed glob matches nothing.

const NEVER: GlobMatcher = () => false;

function hostPartGlob(pattern: string): GlobMatcher {
  return compileGlob(pattern, { classes: true }) ?? NEVER;
}
