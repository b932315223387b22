// Image patterns, as written in policies. `test` takes a reference from parseImageReference
// (already normalized). A pattern is exactly one of:
//
// 1. "*" — matches every image.
//
// 2. A digest: "sha256:<hex>" or "@sha256:<hex>" (sha512 too) — matches any image, from any registry or
//    repository, whose digest equals it. A pattern starting with "sha256:"/"sha512:" is always read as a
//    digest, never as the Docker Hub image "library/sha256"; write "docker.io/library/sha256:…" for that.
//
// 3. A reference (no "*" or "?"), parsed and normalized by the image-reference grammar:
//    - no tag, no digest ("nginx")    → any image of that repository, whatever its tag or digest;
//    - a tag ("nginx:1.25")           → the image's effective tag must equal it: its explicit tag, or
//                                       "latest" when it has neither tag nor digest ("nginx" matches
//                                       "nginx:latest"; "nginx@sha256:…" has no tag and does not);
//    - a digest ("nginx@sha256:…")    → the image's digest must equal it;
//    - both                           → both must hold.
//
// 4. A glob (contains "*" or "?"): "*" matches any run of characters, "/" included; "?" matches one
//    character. The glob must match the image's whole fullName(), e.g. "docker.io/library/nginx:latest"
//    or "quay.io/x/y:1@sha256:…". Consequences:
//    - "*:latest" matches "nginx" (implicit tag); "*@sha256:*" matches every digest-pinned image;
//    - a glob ending in a repository name matches nothing: write "nginx:*" or "nginx*", not "nginx";
//    - "nginx@sha256:*" does not match "nginx:1@sha256:…" (the tag sits before "@"); use "nginx*@sha256:*".
//    Before matching, the glob is normalized like a reference unless it starts with "*": its first
//    "/"-separated component is a registry if it contains "." or ":" or is "localhost" (lowercased,
//    "index.docker.io" → "docker.io"), otherwise "docker.io/" is prepended; on Docker Hub, a glob
//    with no "/" after the registry that does not start with "*" gets "library/", as "nginx" does:
//      "myorg/*" → "docker.io/myorg/*", "nginx:*" → "docker.io/library/nginx:*",
//      "docker.io/*" → "docker.io/*" (all of Docker Hub), "*:latest" → unchanged.
//    Host boundary: "registry.example.com/*" does NOT match "registry.example.com.evil.io/x", because
//    the "/" after the host is a literal character of the glob and a host never contains "/", so the
//    host must end exactly there. Patterns whose look and meaning differ are refused at load (likelyMistake):
//    a registry name without "/" ("registry.example.com*", "localhost:*": Docker Hub names), a wildcard in
//    the host ("*.example.com/*" would match "evil.io/x.example.com/app"), and "**".
//
// Matching is the project's one glob engine (src/core/primitives/glob.ts), without backtracking blow-up.

import type { ImageReference } from "./image-reference.ts";
import { compileGlob } from "./primitives/glob.ts";
import { checkDigest, checkImageReference, effectiveTag, fullName, repositoryName, splitRegistry, withOfficialPrefix } from "./image-reference.ts";

export type ImagePattern = { source: string; test(ref: ImageReference): boolean };
export type PatternResult = { ok: true; pattern: ImagePattern } | { ok: false; error: string };

const KNOWN_DIGEST = /^@|^sha(?:256|512):/;
// Characters that can appear in a fullName(), plus the wildcards.
const GLOB_CHARACTER = /^[A-Za-z0-9._\-/:@[\]*?]$/;

export function compileImagePattern(source: string): PatternResult {
  const fail = (reason: string): PatternResult => ({ ok: false, error: `invalid image pattern ${JSON.stringify(String(source))}: ${reason}` });
  const ok = (test: (ref: ImageReference) => boolean): PatternResult => ({ ok: true, pattern: { source, test } });

  if (typeof source !== "string") return fail("must be a string");
  if (source === "") return fail("must not be empty");
  if (/[\s\x00-\x1f\x7f]/.test(source)) return fail("must not contain whitespace or control characters");
  if (source === "*") return ok(() => true);
  const mistake = likelyMistake(source);
  if (mistake) return fail(mistake);

  if (/[*?]/.test(source)) {
    if (source.startsWith("@")) return fail('a digest glob needs a name before "@"; "*@sha256:*" matches every digest-pinned image');
    for (const c of source) {
      if (!GLOB_CHARACTER.test(c)) return fail(`contains ${JSON.stringify(c)}, which cannot appear in an image reference`);
    }
    if (source.indexOf("@") !== source.lastIndexOf("@")) return fail('contains more than one "@"');
    const matches = compileGlob(normalizeGlob(source), { anyChar: true });
    return ok((ref) => matches(fullName(ref)));
  }

  if (KNOWN_DIGEST.test(source)) {
    const digest = source.startsWith("@") ? source.slice(1) : source;
    const problem = checkDigest(digest);
    if (problem) return fail(problem);
    return ok((ref) => ref.digest === digest);
  }

  const parsed = checkImageReference(source);
  if (!parsed.ok) return fail(parsed.reason);
  const want = parsed.ref;
  const repository = repositoryName(want);
  return ok(
    (ref) =>
      repositoryName(ref) === repository &&
      (want.tag === undefined || effectiveTag(ref) === want.tag) &&
      (want.digest === undefined || ref.digest === want.digest),
  );
}

/**
 * Patterns that are valid but would not match what they look like they match, refused at load with what they
 * would match instead:
 * - a registry host (a name with "." or "localhost", with or without a port) and no "/": it reads as a Docker
 *   Hub image ("localhost:*" is docker.io/library/localhost with any tag, not every port of localhost);
 * - a wildcard inside the registry host: "*" also matches "/", so "*.example.com/*" matches
 *   "evil.io/x.example.com/app" and "registry.*.io/app" matches "registry.evil.com/x.io/app" (a wildcard port,
 *   "localhost:*\/*", stays inside the host and is allowed);
 * - "**": "*" already matches across "/", so it means the same as "*" and suggests a difference there is not.
 */
function likelyMistake(source: string): string | undefined {
  if (source.includes("**")) return `"**" means the same as "*" here ("*" already matches "/"); write "*"`;
  const slash = source.indexOf("/");
  if (slash < 0) {
    const name = source.split(/[:@]/, 1)[0]!;
    if (name.startsWith("*") && name.includes(".")) {
      return `it has no "/" and starts with "*", so it is matched against whole image names and also matches ${JSON.stringify(`evil.io/x${source.slice(1).replace(/[*?]/g, "x")}`)}; for registries, write each one as "host/*"`;
    }
    if (name === "localhost" || name.includes(".")) {
      const host = source.split("@", 1)[0]!;
      return (
        `it has no "/", so it is read as the Docker Hub image docker.io/library/${source}, not as a registry; ` +
        `for every image of the registry ${host} write ${JSON.stringify(`${host}/*`)}`
      );
    }
    return undefined;
  }
  const host = source.slice(0, slash);
  if (host === "*" || !/[*?]/.test(host)) return undefined;
  if (/^[^*?]+:\*$/.test(host)) return undefined;
  // A first part that does not look like a host ("team-*") is a Docker Hub namespace glob.
  if (!/[.:]/.test(host)) return undefined;
  return (
    `the wildcard in the registry part ${JSON.stringify(host)} also matches "/", so the pattern matches images of other ` +
    `registries (${JSON.stringify(source)} matches ${JSON.stringify(exampleOtherRegistry(source, slash))}); list the registries one by one`
  );
}

/** An image of another registry that a pattern with a wildcard in its host would match. */
function exampleOtherRegistry(source: string, slash: number): string {
  const host = source.slice(0, slash);
  const filled = host.replace(/[*?]/, "evil.io/x").replace(/[*?]/g, "x");
  return `${filled}${source.slice(slash).replace(/[*?]/g, "x")}`;
}

/** Rewrites a glob into fullName() form; see the rules at the top of the file. */
function normalizeGlob(glob: string): string {
  if (glob.startsWith("*")) return glob;
  const { registry, rest } = splitRegistry(glob);
  // "docker.io/*" means all of Docker Hub, not "library/*".
  return `${registry}/${rest.startsWith("*") ? rest : withOfficialPrefix(registry, rest)}`;
}
