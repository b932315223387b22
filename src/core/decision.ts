// The one shape every evaluation returns, and the one rendering of it shared by the webhook,
// the ImageReview reason and the CLI ("errors are data").

export interface Violation {
  /** Policy that produced the violation (metadata.name), or "imprimatur" for request-level problems. */
  policy: string;
  /** Set for PodRestriction violations; image policies and request-level problems leave it unset. */
  kind?: "PodRestriction";
  /** Which part of the policy decided: "rules[1]", "default", "namespaceSelector", "breakGlass", … */
  rule: string;
  /** The image concerned, as written in the request. */
  image?: string;
  /** Field path in the object, e.g. "spec.containers[0].image". */
  field?: string;
  /** Why, in words a person can act on. */
  message: string;
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

export interface Decision {
  allowed: boolean;
  violations: Violation[];
  warnings: string[];
  /** Keys without prefix; the server prefixes them with the webhook's audit-annotation domain. */
  auditAnnotations: Record<string, string>;
  breakGlass?: BreakGlassUse;
  /** Remote backends that could not answer and were skipped because the server fails open. */
  failOpen?: Array<{ backend: string; error: string }>;
  /** Changes to the object (mutating webhook only). */
  patches?: JsonPatchOperation[];
}

export function allow(extra: Partial<Decision> = {}): Decision {
  return { allowed: true, violations: [], warnings: [], auditAnnotations: {}, ...extra };
}

export function deny(violations: Violation[], extra: Partial<Decision> = {}): Decision {
  return { allowed: false, violations, warnings: [], auditAnnotations: {}, ...extra };
}

/** `image "nginx:latest" (spec.containers[0].image) denied by policy trusted-registries rules[1]: pin a version` */
export function renderViolation(v: Violation): string {
  const subject = v.image !== undefined
    ? `image ${JSON.stringify(v.image)}${v.field ? ` (${v.field})` : ""}`
    : v.field ?? "request";
  return `${subject} denied by ${v.kind ?? "policy"} ${v.policy} ${v.rule}: ${v.message}`;
}

/** Both decisions must allow; their violations, warnings and audit annotations are kept together. */
export function combineDecisions(a: Decision, b: Decision): Decision {
  const combined: Decision = {
    ...a,
    allowed: a.allowed && b.allowed,
    violations: [...a.violations, ...b.violations],
    warnings: [...a.warnings, ...b.warnings],
    auditAnnotations: { ...a.auditAnnotations, ...b.auditAnnotations },
  };
  if (b.breakGlass) combined.breakGlass = b.breakGlass;
  if (b.failOpen) combined.failOpen = [...(a.failOpen ?? []), ...b.failOpen];
  if (b.patches) combined.patches = [...(a.patches ?? []), ...b.patches];
  return combined;
}

/** All violations on one line each joined with "; " — the apiserver shows this string to the user. */
export function renderReason(violations: Violation[]): string {
  return violations.map(renderViolation).join("; ");
}
