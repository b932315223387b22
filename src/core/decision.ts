// The one shape every evaluation returns, and the one rendering of it shared by the webhook,
// the ImageReview reason and the CLI ("errors are data").

/** What a failed check does (validationActions; see validation-actions.ts). */
export type ValidationAction = "Deny" | "Warn" | "Audit";

export interface Violation {
  /** Policy that produced the violation (metadata.name), or "imprimatur" for request-level problems. */
  policy: string;
  /** Set for PodRestriction and namespaced policies' violations; cluster image policies and request-level problems leave it unset. */
  kind?: "PodRestriction" | "NamespacedImagePolicy" | "NamespacedPodRestriction";
  /** Which part of the policy decided: "rules[1]", "default", "namespaceSelector", "breakGlass", … */
  rule: string;
  /** The image concerned, as written in the request. */
  image?: string;
  /** Field path in the object, e.g. "spec.containers[0].image". */
  field?: string;
  /** Why, in words a person can act on. */
  message: string;
  /** The policy's or rule's validationActions; absent: Deny. */
  actions?: readonly ValidationAction[];
  /** The whole message as shown, for a standard whose own wording must be kept (Pod Security Admission's). */
  text?: string;
}

/** An override of a denial by the break-glass annotations, to be written to the audit log before answering. */
export interface BreakGlassUse {
  reason: string;
  ticket: string;
  /** The denials that the override set aside. */
  overridden: Violation[];
}

/** One RFC 6902 operation; the mutating webhook answers with a list of them (patchType JSONPatch). */
export interface JsonPatchOperation {
  op: "add" | "replace" | "remove" | "test";
  /** RFC 6901 JSON pointer: "/spec/containers/0/image". */
  path: string;
  value?: unknown;
}

/** A policy, rule or check that applied and was satisfied: audit records, metrics and reports show passes too. */
export interface Pass {
  policy: string;
  kind?: "PodRestriction" | "ImagePolicy" | "NamespacedImagePolicy" | "NamespacedPodRestriction" | "Backend";
  /** What decided: "rules[0]", "default", a check's name, "review" for a backend. */
  rule: string;
  image?: string;
  field?: string;
}

/** A failure a PolicyException set aside (apply-exceptions.ts): audited, warned of and reported as skip. */
export interface Exemption {
  /** The exception, "namespace/name". */
  exception: string;
  violation: Violation;
}

export interface Decision {
  allowed: boolean;
  /** The failures that deny (validationActions holding Deny). */
  violations: Violation[];
  /** Failures that only warn or audit (validationActions without Deny): they do not deny, reports list them. */
  advisories?: Violation[];
  warnings: string[];
  /** Keys without prefix; the server prefixes them with the webhook's audit-annotation domain. */
  auditAnnotations: Record<string, string>;
  /** What applied and passed (absent when nothing did). */
  passes?: Pass[];
  breakGlass?: BreakGlassUse;
  /** Remote backends that could not answer and were skipped because the server fails open. */
  failOpen?: Array<{ backend: string; error: string }>;
  /** Changes to the object (mutating webhook only). */
  patches?: JsonPatchOperation[];
  /** Failures that PolicyExceptions set aside: neither denying nor warning as failures, but recorded. */
  exemptions?: Exemption[];
}

export function allow(extra: Partial<Decision> = {}): Decision {
  return { allowed: true, violations: [], warnings: [], auditAnnotations: {}, ...extra };
}

/**
 * Admitted because something gave no answer and the server fails open: a warning each, the fail-open audit
 * annotation, and the entries the audit log and the fail-open metric are written from.
 */
export function admittedFailingOpen(warnings: string[], failOpen: NonNullable<Decision["failOpen"]>): Decision {
  return allow({ warnings, auditAnnotations: { "fail-open": "true" }, failOpen });
}

export function deny(violations: Violation[], extra: Partial<Decision> = {}): Decision {
  return { allowed: false, violations, warnings: [], auditAnnotations: {}, ...extra };
}

/** `image "nginx:latest" (spec.containers[0].image) denied by policy trusted-registries rules[1]: pin a version` */
export function renderViolation(v: Violation, verb: "denied by" | "violates" = "denied by"): string {
  if (v.text !== undefined) return v.text;
  const subject = v.image !== undefined ? `image ${JSON.stringify(v.image)}${v.field ? ` (${v.field})` : ""}` : (v.field ?? "request");
  return `${subject} ${verb} ${v.kind ?? "policy"} ${v.policy} ${v.rule}: ${v.message}`;
}

/**
 * All must allow. Violations, warnings, passes and audit annotations are kept together, in order. A break-glass
 * override only happened if the admission as a whole goes through; the denials it set aside are merged.
 */
export function combineDecisions(...decisions: Decision[]): Decision {
  // One pass with plain loops: this runs on every admission.
  const out: Decision = { allowed: true, violations: [], warnings: [], auditAnnotations: {} };
  const passes: Pass[] = [];
  const advisories: Violation[] = [];
  const overrides: BreakGlassUse[] = [];
  const failOpen: NonNullable<Decision["failOpen"]> = [];
  const patches: JsonPatchOperation[] = [];
  for (const d of decisions) {
    if (!d.allowed) out.allowed = false;
    appendAll(out.violations, d.violations);
    appendAll(out.warnings, d.warnings);
    Object.assign(out.auditAnnotations, d.auditAnnotations);
    if (d.passes) appendAll(passes, d.passes);
    if (d.advisories) appendAll(advisories, d.advisories);
    if (d.breakGlass) overrides.push(d.breakGlass);
    if (d.failOpen) appendAll(failOpen, d.failOpen);
    if (d.patches) appendAll(patches, d.patches);
  }
  if (passes.length > 0) out.passes = passes;
  if (advisories.length > 0) out.advisories = advisories;
  if (overrides.length > 0 && out.allowed) out.breakGlass = { ...overrides[0]!, overridden: overrides.flatMap((o) => o.overridden) };
  if (failOpen.length > 0) out.failOpen = failOpen;
  if (patches.length > 0) out.patches = patches;
  return out;
}

/** push(...items) without spreading arguments, which a pod with many thousands of containers could overflow. */
function appendAll<T>(into: T[], items: readonly T[]): void {
  for (const item of items) into.push(item);
}

/** How many violations a message, a log line or an audit annotation lists before summing up the rest. */
export const MAX_LISTED_VIOLATIONS = 20;

/** The first `max` entries and the number left out, so a 10,000-container pod cannot make a 10 MB line. */
export function capList<T>(items: readonly T[], max = MAX_LISTED_VIOLATIONS): { listed: T[]; more: number } {
  return items.length <= max ? { listed: [...items], more: 0 } : { listed: items.slice(0, max), more: items.length - max };
}

/** "… and 9,990 more" */
export function moreText(more: number, noun = "more"): string {
  return `… and ${more.toLocaleString("en-US")} ${noun}`;
}

/** All violations on one line each joined with "; " — the apiserver shows this string to the user. Capped. */
export function renderReason(violations: Violation[]): string {
  const { listed, more } = capList(violations);
  const text = listed.map((v) => renderViolation(v)).join("; ");
  return more > 0 ? `${text}; ${moreText(more)}` : text;
}
