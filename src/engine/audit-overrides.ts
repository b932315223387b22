// Break-glass overrides, failures set aside by PolicyExceptions and fail-open admissions are written to the audit
// log, durably, before the answer.
// If the record cannot be written the admission is denied: an override that leaves no trace is not allowed.
// Refused break-glass attempts are recorded too (event break-glass-refused), as attempts.
// Dry runs decide the same way but leave no record (the webhooks declare sideEffects: NoneOnDryRun).
import type { Logger } from "pino";
import type { AuditLog } from "../audit/audit-log.ts";
import { describeCaller } from "../audit/caller.ts";
import type { AdmissionSubject } from "../core/admission-subject.ts";
import { BREAK_GLASS_REASON, BREAK_GLASS_TICKET, breakGlassRequested } from "../core/break-glass.ts";
import { deny, type Decision } from "../core/decision.ts";
import type { AdmissionCall } from "./admission-call.ts";

export async function recordOverrides(
  audit: AuditLog | undefined,
  logger: Logger,
  decision: Decision,
  subject: AdmissionSubject,
  call: AdmissionCall,
  images: string[],
): Promise<Decision> {
  if (call.dryRun) return decision;
  if (!decision.allowed) {
    if (decision.auditAnnotations["break-glass"] === "refused") await recordRefusedBreakGlass(audit, logger, decision, subject, call, images);
    return decision;
  }
  if (!decision.breakGlass && !decision.failOpen && !decision.exemptions) return decision;
  const base = recordBase(decision, subject, call, images);
  try {
    if (!audit) throw new Error("no audit log is configured");
    if (decision.breakGlass) {
      await audit.append({
        ...base,
        event: "break-glass",
        reason: decision.breakGlass.reason,
        ticket: decision.breakGlass.ticket,
        overridden: decision.breakGlass.overridden,
      });
      logger.warn({ ...base, passes: undefined, ticket: decision.breakGlass.ticket }, "break-glass override admitted");
    }
    if (decision.exemptions) {
      const exceptions = [...new Set(decision.exemptions.map((x) => x.exception))];
      await audit.append({ ...base, event: "policy-exception", exceptions, setAside: decision.exemptions });
      logger.warn({ ...base, passes: undefined, exceptions }, "admitted with failures set aside by policy exceptions");
    }
    if (decision.failOpen) {
      await audit.append({ ...base, event: "fail-open", backends: decision.failOpen });
      logger.warn({ ...base, passes: undefined, backends: decision.failOpen }, "admitted by fail-open");
    }
  } catch (e) {
    logger.error({ err: e, ...base, passes: undefined }, "audit log write failed; denying");
    return deny([
      { policy: "imprimatur", rule: "auditLog", message: `the admission could not be recorded in the audit log (${(e as Error).message}), so it is denied` },
    ]);
  }
  return decision;
}

/** What every record says: when, which endpoint and request, who asked, which images and digests. */
function recordBase(decision: Decision, subject: AdmissionSubject, call: AdmissionCall, images: string[]) {
  return {
    time: new Date().toISOString(),
    endpoint: call.endpoint,
    ...(call.uid ? { uid: call.uid } : {}),
    namespace: subject.namespace,
    ...(subject.object.kind && subject.origin === "object" ? { kind: subject.object.kind } : {}),
    ...(subject.object.name ? { name: subject.object.name } : {}),
    ...(call.user ? { user: call.user } : {}),
    // Which caller (cluster) sent it, or that no caller was authenticated: a record is only as good as its sender.
    ...(call.caller ? { caller: describeCaller(call.caller) } : {}),
    images,
    // The digests that were verified, so the record says what was admitted and not only the references.
    ...(decision.auditAnnotations["verified-images"] ? { verifiedImages: JSON.parse(decision.auditAnnotations["verified-images"]) as unknown } : {}),
    ...(decision.passes ? { passes: decision.passes } : {}),
  };
}

/**
 * A break-glass attempt the server refused (the policy allows none, an annotation is missing, the user may not):
 * recorded as an attempt. The denial stands whether or not the record can be written; a failed write is logged.
 */
async function recordRefusedBreakGlass(
  audit: AuditLog | undefined,
  logger: Logger,
  decision: Decision,
  subject: AdmissionSubject,
  call: AdmissionCall,
  images: string[],
): Promise<void> {
  const asked = subject.pods.find((pod) => breakGlassRequested(pod.annotations))?.annotations ?? {};
  const record = {
    ...recordBase(decision, subject, call, images),
    event: "break-glass-refused" as const,
    ...(asked[BREAK_GLASS_REASON] ? { reason: asked[BREAK_GLASS_REASON] } : {}),
    ...(asked[BREAK_GLASS_TICKET] ? { ticket: asked[BREAK_GLASS_TICKET] } : {}),
    refusals: decision.violations.filter((v) => v.rule === "breakGlass"),
    denials: decision.violations.filter((v) => v.rule !== "breakGlass"),
  };
  logger.warn({ ...record, passes: undefined }, "break-glass override refused");
  try {
    if (!audit) throw new Error("no audit log is configured");
    await audit.append(record);
  } catch (e) {
    logger.error({ err: e, ...record, passes: undefined }, "audit log write of a refused break-glass attempt failed; the request is denied");
  }
}
