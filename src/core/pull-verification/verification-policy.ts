// When an image already on the node must be verified against a pod's credentials before the pod may use it
// (KEP-2535, "Ensure Secret Pulled Images"), with the kubelet's four policies and its allowlist of preloaded
// images. Pure.
import { canonicalRegistryHost, parseImageReference, repositoryName } from "../image-reference.ts";

export const VERIFICATION_POLICIES = ["NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages", "AlwaysVerify"] as const;
export type VerificationPolicy = (typeof VERIFICATION_POLICIES)[number];
/** The kubelet's default. */
export const DEFAULT_VERIFICATION_POLICY: VerificationPolicy = "NeverVerifyPreloadedImages";

/** An allowlist entry: a normalised repository, exactly, or every repository under a prefix ("host/path/*"). */
export type AllowlistPattern = { exact: string } | { prefix: string };

/**
 * Parses an allowlist entry as the kubelet accepts them: an image name without tag or digest, optionally ending
 * in "/*". Names are normalised first, so "alpine" matches "docker.io/library/alpine" (an upstream defect fixed
 * later: short names did not match).
 */
export function parseAllowlistPattern(text: string): AllowlistPattern | { error: string } {
  const wildcard = text.endsWith("/*");
  const name = wildcard ? text.slice(0, -2) : text;
  if (name.includes("*")) return { error: `${JSON.stringify(text)}: "*" may only end the pattern, as "/*"` };
  // A bare registry host ("registry.example.com:5000/*") would parse as a Docker Hub name with a tag.
  if (wildcard && !name.includes("/") && /[.:]|^localhost$/.test(name)) return { prefix: `${canonicalRegistryHost(name)}/` };
  const parsed = parseImageReference(name);
  if (!parsed.ok) return { error: `${JSON.stringify(text)}: ${parsed.error}` };
  if (parsed.ref.tag !== undefined || parsed.ref.digest !== undefined) return { error: `${JSON.stringify(text)}: name a repository, without tag or digest` };
  const repository = repositoryName(parsed.ref);
  return wildcard ? { prefix: `${repository}/` } : { exact: repository };
}

export function allowlisted(repository: string, allowlist: readonly AllowlistPattern[]): boolean {
  return allowlist.some((p) => ("exact" in p ? p.exact === repository : repository.startsWith(p.prefix)));
}

/**
 * Whether a pod must show credentials for an image already present. `preloaded`: the image was on the node before
 * the proxy first ran (pulled outside it), so no credentials were recorded for it.
 */
export function requiresVerification(policy: VerificationPolicy, preloaded: boolean, repository: string, allowlist: readonly AllowlistPattern[]): boolean {
  switch (policy) {
    case "NeverVerify":
      return false;
    case "NeverVerifyPreloadedImages":
      return !preloaded;
    case "NeverVerifyAllowlistedImages":
      return !(preloaded && allowlisted(repository, allowlist));
    case "AlwaysVerify":
      return true;
  }
}
