// /mutate's step: tag→digest pinning (or recording) of the subject's digestMutate images, the record of the images
// it verified written onto the object, the overrides audited and the pinning Event.
import type { AdmissionSubject } from "../core/admission-subject.ts";
import { allow, type Decision } from "../core/decision.ts";
import { applyExceptions } from "../core/policy-exception/apply-exceptions.ts";
import type { PreparedPolicies } from "../core/policy-set/policy-kinds.ts";
import type { AdmissionCall } from "./admission-call.ts";
import { recordOverrides } from "./audit-overrides.ts";
import type { OnlineTools } from "./cluster-tools.ts";
import type { EngineParts } from "./engine-parts.ts";
import { pinRequest } from "./pin-request.ts";
import { recordPinningEvent } from "./pinning-events.ts";
import { verifiedImagePatches } from "./verify-images.ts";

/** The pinning decision, or undefined when no image asks to be pinned and none was verified. */
export async function pinSubject(
  parts: EngineParts,
  subject: AdmissionSubject,
  call: AdmissionCall,
  tools: OnlineTools,
  scope: { prepared: PreparedPolicies; namespaceLabels?: Record<string, string> },
): Promise<Decision | undefined> {
  const { prepared, namespaceLabels } = scope;
  const pinner = tools.pinner;
  const outcome = subject.images.length > 0 ? await pinner.pin(pinRequest(subject, prepared), call.deadline) : undefined;
  const verified = pinner.mode === "mutate" ? await verifiedImagePatches(tools, prepared, namespaceLabels, subject, outcome, call.deadline) : [];
  if (!outcome && verified.length === 0) return undefined;
  // A pin that failed under a rule an exception sets aside does not deny: the image goes through unpinned.
  const base = outcome ? applyExceptions(outcome.decision, subject, prepared.byKind.PolicyException, parts.honouredExceptions) : allow();
  if (base.allowed && verified.length > 0) base.patches = [...(base.patches ?? []), ...verified];
  const failed = outcome?.failed.map((f) => f.target.image) ?? [];
  const decision = await recordOverrides(parts.audit, parts.logger, base, subject, call, failed);
  if (!call.dryRun && outcome && tools.events) recordPinningEvent(tools.events, pinner.mode, subject, outcome);
  return decision;
}
