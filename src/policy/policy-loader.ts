// Loading a PolicySource while serving: one load at a time (a watch and SIGHUP may ask together), each read
// followed by its own outcome reported to the source (custom resources write it to their status), and a later
// load never finishing before an earlier one. The server's own policies and each other cluster's own policy
// resources (src/policy-resources/cluster-policy-resources.ts) load through it.
import type { Logger } from "pino";
import type { PolicySet } from "../core/policy-set/policy-kinds.ts";
import { PolicyLoadError, renderPolicyError } from "./policy-error.ts";
import type { PolicySource } from "./policy-source.ts";
import { loadPolicySet } from "./policy-set.ts";

/** Loads `source` with `profiles` bound; `allowEmpty` false refuses a set with no policy (EmptyPolicySetError). */
export type PolicyLoad = (allowEmpty?: boolean) => Promise<PolicySet>;

export function serializedPolicyLoader(source: PolicySource, opts: { profiles: readonly string[]; logger: Logger }): PolicyLoad {
  const loadOnce = async (allowEmpty: boolean): Promise<PolicySet> => {
    try {
      const loaded = await loadPolicySet(source, { profiles: opts.profiles, allowEmpty });
      // In force, but a rule denies what it matches for want of a trust root: said at every load that has one.
      for (const w of loaded.warnings) opts.logger.warn({ reason: w.reason, policy: renderPolicyError(w) }, "a policy rule denies every image it matches");
      source.loaded?.({ errors: [] });
      return loaded.policies;
    } catch (e) {
      // The source reports the outcome where its policies live (custom resources: their status).
      if (e instanceof PolicyLoadError) source.loaded?.({ errors: e.errors });
      throw e;
    }
  };
  let loading: Promise<unknown> = Promise.resolve();
  return (allowEmpty = true) => {
    const once = () => loadOnce(allowEmpty);
    const next = loading.then(once, once);
    loading = next.catch(() => undefined);
    return next;
  };
}
