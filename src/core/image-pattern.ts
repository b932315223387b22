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
//    host must end exactly there. ("registry.example.com*" has no "/", so it is read as the Docker Hub
//    glob "docker.io/library/registry.example.com*".) A leading "*" spans registry and path alike:
//    "*.example.com/*" also matches "docker.io/team.example.com/app:1", as "." is allowed in paths.
//
// Matching is the project's one glob engine (src/core/glob.ts), without backtracking blow-up.

import type { ImageReference } from "./image-reference.ts";
import { compileGlob } from "./glob.ts";
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

/** Rewrites a glob into fullName() form; see the rules at the top of the file. */
function normalizeGlob(glob: string): string {
  if (glob.startsWith("*")) return glob;
  const { registry, rest } = splitRegistry(glob);
  // "docker.io/*" means all of Docker Hub, not "library/*".
  return `${registry}/${rest.startsWith("*") ? rest : withOfficialPrefix(registry, rest)}`;
}
