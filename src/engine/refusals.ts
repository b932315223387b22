// Reviews the engine refuses whatever the failure policy, before any policy is asked: nothing in force under
// --require-policies, or a read of a cluster the server cannot read.
import { deny, type Decision } from "../core/decision.ts";

/** The denial of every review while `--require-policies` finds nothing in force. */
export const NO_POLICY_IN_FORCE =
  "no policy is in force yet, and the server requires one (serve --require-policies): every request is refused until a policy is loaded";

/** Denied whatever the failure policy, audited as a denial. */
export function refusal(rule: "noPolicy" | "clusterAccess", message: string): Decision {
  return deny([{ policy: "imprimatur", rule, message }], { auditAnnotations: { decision: "denied" } });
}
