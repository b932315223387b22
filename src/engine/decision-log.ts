// One log line per decision naming who asked for what, and the decision metrics.
import type { Logger } from "pino";
import { describeCaller } from "../audit/caller.ts";
import type { AdmissionSubject } from "../core/admission-subject.ts";
import { capList, type Decision } from "../core/decision.ts";
import type { AdmissionCall } from "./admission-call.ts";
import type { Recorder } from "./recorder.ts";

export function logDecision(logger: Logger, recorder: Recorder, subject: AdmissionSubject, call: AdmissionCall, decision: Decision): void {
  // The background audit counts and logs its own results (src/scan/): a scan of every pod is not admissions.
  if (call.endpoint === "audit") return;
  recorder.decision(call.endpoint, decision);
  // Plain admissions are the bulk of traffic and logged at debug only: nothing is built for them otherwise.
  if (decision.allowed && !logger.isLevelEnabled("debug")) return;
  const who = {
    endpoint: call.endpoint,
    ...(call.uid ? { uid: call.uid } : {}),
    namespace: subject.namespace,
    kind: subject.object.kind,
    name: subject.object.name,
    ...(call.user ? { user: call.user } : {}),
    ...(call.caller ? { caller: describeCaller(call.caller) } : {}),
    ...(call.dryRun ? { dryRun: true } : {}),
  };
  // Denials at info; plain admissions at debug (they are the bulk of traffic; overrides are logged where
  // they are written to the audit log).
  if (decision.allowed) {
    logger.debug({ ...who, allowed: true, passes: capList(decision.passes ?? []).listed }, "admitted");
    return;
  }
  const { listed, more } = capList(decision.violations);
  logger.info({ ...who, allowed: false, violations: listed, ...(more > 0 ? { moreViolations: more } : {}) }, "denied");
}
