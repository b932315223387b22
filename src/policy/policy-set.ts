// The one way `serve`, `check` and `imprimatur test` turn their flags into a policy set, so that what the
// offline commands pass is what the server admits: the same default folder, the same shipped profiles bound in
// front of it, and the same refusal of a set with no policy at all.
import { fileURLToPath } from "node:url";
import { policyCount } from "../core/policy-set/policy-kinds.ts";
import { loadPoliciesWithProfiles, type LoadedPolicies } from "./load-policies.ts";
import { PolicyLoadError } from "./policy-error.ts";
import { policyFolders, type PolicySource } from "./policy-source.ts";

/** The policy folder shipped inside the package: what `serve`, `check` and `test` use without --policies. */
export const EMBEDDED_POLICIES = fileURLToPath(new URL("../../policies/default/", import.meta.url));

/**
 * The folders or files named by --policies, else the embedded default policy. --profile adds to the set and
 * never replaces the default: `check --profile restricted` judges what `serve --profile restricted` admits.
 * An empty list (a PolicyTest's `policies: []`) names no folder: the profiles alone.
 */
export function policyPaths(given: readonly string[] | undefined): string[] {
  return given !== undefined ? [...given] : [EMBEDDED_POLICIES];
}

/** The source of `policyPaths(given)`. */
export function policySetSource(given: readonly string[] | undefined): PolicySource {
  return policyFolders(policyPaths(given));
}

/** Refused by default: a set with no policy admits everything, which is rarely what was meant. */
export class EmptyPolicySetError extends PolicyLoadError {
  constructor(source: string) {
    super([{ origin: source, message: "no policy was found (an empty set admits everything); add policies, or pass --allow-empty if that is what you mean" }]);
  }
}

export interface PolicySetOptions {
  /** Shipped profiles bound cluster-wide, in front of the source's PodRestrictions (--profile). */
  profiles: readonly string[];
  /** Accept a set with no policy (--allow-empty); else EmptyPolicySetError. */
  allowEmpty: boolean;
}

/**
 * Loads the set from `source` with the profiles bound. Throws PolicyLoadError for an invalid set or an unknown
 * profile, and EmptyPolicySetError for an empty set unless `allowEmpty`.
 */
export async function loadPolicySet(source: PolicySource, opts: PolicySetOptions): Promise<LoadedPolicies> {
  const loaded = await loadPoliciesWithProfiles(source, opts.profiles);
  if (!opts.allowEmpty && policyCount(loaded.policies) === 0) throw new EmptyPolicySetError(source.description);
  return loaded;
}
