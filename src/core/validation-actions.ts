// What a failed policy does: validationActions, with ValidatingAdmissionPolicy's meaning (and Kyverno
// ImageValidatingPolicy's). Deny refuses the request (the default); Warn admits it and returns the message as a
// warning, which kubectl prints; Audit admits it and records the failure in the audit annotations, hence the
// apiserver's audit log. Any combination but Deny with Warn (a denial already says it), as VAP allows.
//
// Kinds stamp each violation with the actions of the policy or rule that produced it, and split their failures
// with `splitByAction` before deciding: only enforced ones deny (and only they can be set aside by break-glass);
// the others are the decision's advisories. The engine then applies Warn and Audit once (`withActionEffects`).
import { capList, moreText, renderViolation, type Decision, type ValidationAction, type Violation } from "./decision.ts";

export type { ValidationAction } from "./decision.ts";

export const VALIDATION_ACTIONS: readonly ValidationAction[] = ["Deny", "Warn", "Audit"];

/** The audit annotation (prefixed by the apiserver with the webhook's name) that lists failures set to Audit. */
export const VALIDATION_FAILURES_ANNOTATION = "validation-failures";

/** A failed check's actions: its own (a violation without any is enforced, as before validationActions existed). */
export function actionsOf(v: Violation): readonly ValidationAction[] {
  return v.actions ?? DENY;
}

const DENY: readonly ValidationAction[] = ["Deny"];

export function denies(v: Violation): boolean {
  return actionsOf(v).includes("Deny");
}

/**
 * A `validationActions` field as written: a list of distinct actions, not Deny with Warn. Returns the list, or
 * why it is refused (the caller adds the field path).
 */
export function compileValidationActions(raw: unknown): { actions?: ValidationAction[]; error?: string } {
  if (!Array.isArray(raw) || raw.length === 0) return { error: `must be a non-empty list of ${VALIDATION_ACTIONS.join(", ")}` };
  const actions: ValidationAction[] = [];
  for (const item of raw) {
    const action = VALIDATION_ACTIONS.find((a) => a === item);
    if (!action) return { error: `must hold only ${VALIDATION_ACTIONS.join(", ")}; got ${JSON.stringify(item)}` };
    if (actions.includes(action)) return { error: `lists ${action} twice` };
    actions.push(action);
  }
  if (actions.includes("Deny") && actions.includes("Warn"))
    return { error: "cannot hold both Deny and Warn (a denial already tells the user why; ValidatingAdmissionPolicy refuses the pair too)" };
  return { actions };
}

/** `image "nginx:latest" (spec.containers[0].image) violates policy trusted-registries rules[1]: pin a version` */
export function renderAdvisory(v: Violation): string {
  return renderViolation(v, "violates");
}

/** One entry of the validation-failures audit annotation (VAP's validation_failure shape, with Imprimatur's names). */
interface AuditedFailure {
  message: string;
  policy: string;
  kind?: string;
  rule: string;
  image?: string;
  field?: string;
  validationActions: readonly ValidationAction[];
}

/** The violations that deny, and those that only warn or audit (advisories): the request is denied by the first only. */
export function splitByAction(violations: readonly Violation[]): { enforced: Violation[]; advisory: Violation[] } {
  const enforced: Violation[] = [];
  const advisory: Violation[] = [];
  for (const v of violations) (denies(v) ? enforced : advisory).push(v);
  return { enforced, advisory };
}

/**
 * What failed checks do besides denying, applied once to the combined decision of every kind: each failure with
 * Warn adds a warning; each with Audit, denying or not, is listed in the validation-failures audit annotation.
 */
export function withActionEffects(decision: Decision): Decision {
  const failures = [...decision.violations, ...(decision.breakGlass?.overridden ?? []), ...(decision.advisories ?? [])];
  if (failures.every((v) => v.actions === undefined)) return decision;
  const warned = failures.filter((v) => actionsOf(v).includes("Warn")).map(renderAdvisory);
  const audited = failures.filter((v) => actionsOf(v).includes("Audit")).map((v) => auditedFailure(v, actionsOf(v)));
  const out: Decision = { ...decision, warnings: [...decision.warnings, ...warned], auditAnnotations: { ...decision.auditAnnotations } };
  if (audited.length > 0) out.auditAnnotations[VALIDATION_FAILURES_ANNOTATION] = auditAnnotationValue(audited);
  return out;
}

function auditedFailure(v: Violation, actions: readonly ValidationAction[]): AuditedFailure {
  return {
    message: v.message,
    policy: v.policy,
    ...(v.kind ? { kind: v.kind } : {}),
    rule: v.rule,
    ...(v.image !== undefined ? { image: v.image } : {}),
    ...(v.field ? { field: v.field } : {}),
    validationActions: actions,
  };
}

/** A JSON list, capped as every list of violations is, so a 10,000-container pod cannot make a 10 MB annotation. */
function auditAnnotationValue(failures: readonly AuditedFailure[]): string {
  const { listed, more } = capList(failures);
  return JSON.stringify(more > 0 ? [...listed, { message: moreText(more, "more failures") }] : listed);
}
