// Break-glass: an explicit, authorized, audited override of image denials (seed: overrides "need to not
// happen accidentally"). It is requested only by annotations under break-glass.image-policy.k8s.io/, applies
// only where every denying policy allows it, and needs every required annotation to be present and non-empty.
import { deny, renderReason, type Decision, type Violation } from "./decision.ts";
import { matchOutcome, type LinearRegex } from "./primitives/linear-regex.ts";

export const BREAK_GLASS_PREFIX = "break-glass.image-policy.k8s.io/";
export const BREAK_GLASS_REASON = `${BREAK_GLASS_PREFIX}reason`;
export const BREAK_GLASS_TICKET = `${BREAK_GLASS_PREFIX}ticket`;
export const DEFAULT_REQUIRED_ANNOTATIONS = [BREAK_GLASS_REASON, BREAK_GLASS_TICKET];

export interface BreakGlassPolicy {
  allowed: boolean;
  /** Annotations that must all be present and non-empty; always includes reason and ticket. */
  requiredAnnotations: string[];
  /** When set, the ticket annotation must match it somewhere (RE2 syntax; e.g. ^[A-Z]+-[0-9]+$ for all of it). */
  ticketPattern?: LinearRegex;
}

/** How the server decides who may use break-glass (ServerConfig breakGlass.authorization). */
export type BreakGlassAuthorization = "SubjectAccessReview" | "None";

/**
 * Whether the requesting user may use break-glass on a policy: the cluster's authorizer answered (a
 * SubjectAccessReview for the verb `break-glass` on the policy's resource, by name), or why it could not be asked.
 */
export type BreakGlassGrant = { allowed: true } | { allowed: false; reason: string };

/**
 * Who may use the override, as the edge found out before the review. `checked: false` when no one is asked (the
 * server's breakGlass.authorization is None, or `check` has no cluster to ask): the override is then honoured on
 * the annotations alone, with a warning that says so. The engine always gives it when break-glass is requested.
 */
export type BreakGlassAccess = { checked: true; user: string; byPolicy: ReadonlyMap<string, BreakGlassGrant> } | { checked: false; why: string };

export interface BreakGlassInput {
  annotations: Record<string, string>;
  /** Who may use it; absent: not asked and not warned of (the core's own callers in tests). */
  access?: BreakGlassAccess | undefined;
  namespace: string;
  /** Violations that are not policy denials (invalid references, unknown namespace labels). */
  blocking: Violation[];
  /** `namespace` is set for a NamespacedImagePolicy, whose refusals name its kind. */
  denials: Array<{ violation: Violation; policy: { name: string; namespace?: string; breakGlass: BreakGlassPolicy } }>;
}

export function breakGlassRequested(annotations: Record<string, string>): boolean {
  return Object.keys(annotations).some((k) => k.startsWith(BREAK_GLASS_PREFIX));
}

/** Turns a denial into an audited allow when the override is requested, permitted and complete. */
export function applyBreakGlass(denied: Decision, input: BreakGlassInput): Decision {
  if (!breakGlassRequested(input.annotations)) return denied;

  const problems: Violation[] = [];
  const refusedBy = new Map<string, BreakGlassInput["denials"][number]["policy"]>();
  const required = new Set<string>();
  for (const { policy } of input.denials) {
    if (!policy.breakGlass.allowed) refusedBy.set(policy.name, policy);
    for (const key of policy.breakGlass.requiredAnnotations) required.add(key);
  }
  for (const policy of refusedBy.values()) {
    problems.push({
      policy: policy.name,
      ...kindOf(policy),
      rule: "breakGlass",
      message: `break-glass was requested but this policy does not allow overrides in namespace ${JSON.stringify(input.namespace)}`,
    });
  }
  const access = input.access;
  if (access?.checked) {
    // A policy with many denials is refused once: dedupe() below keeps one of the same message.
    for (const { policy } of input.denials) {
      if (refusedBy.has(policy.name)) continue;
      const grant = access.byPolicy.get(policy.name) ?? { allowed: false, reason: "no one was asked whether the user may" };
      if (grant.allowed) continue;
      problems.push({
        policy: policy.name,
        ...kindOf(policy),
        rule: "breakGlass",
        message: access.user
          ? `break-glass was requested by ${JSON.stringify(access.user)}, who may not use it on this policy: ${grant.reason}`
          : `break-glass was requested, but no one can be asked whether the requester may use it on this policy: ${grant.reason}`,
      });
    }
  }
  const missing = [...required].filter((k) => !(input.annotations[k] ?? "").trim());
  if (missing.length > 0) {
    problems.push({
      policy: input.denials[0]?.policy.name ?? "imprimatur",
      ...(input.denials[0] ? kindOf(input.denials[0].policy) : {}),
      rule: "breakGlass",
      message: `break-glass needs every one of these annotations, non-empty: ${[...required].join(", ")}; missing: ${missing.join(", ")}`,
    });
  }
  for (const { policy } of input.denials) {
    const pattern = policy.breakGlass.ticketPattern;
    const ticket = input.annotations[BREAK_GLASS_TICKET] ?? "";
    const outcome = pattern && ticket ? matchOutcome(pattern, ticket) : "match";
    if (outcome !== "match") {
      problems.push({
        policy: policy.name,
        ...kindOf(policy),
        rule: "breakGlass",
        message:
          outcome === "mismatch"
            ? `break-glass ticket ${JSON.stringify(ticket)} does not match the required form ${pattern!.source}`
            : `break-glass ticket cannot be checked: ${outcome.error}`,
      });
    }
  }
  if (input.blocking.length > 0) {
    problems.push({
      policy: "imprimatur",
      rule: "breakGlass",
      message: "break-glass cannot override invalid image references or undecidable policies",
    });
  }
  if (problems.length > 0) {
    const violations = [...denied.violations, ...dedupe(problems)];
    return deny(violations, {
      warnings: denied.warnings,
      auditAnnotations: { ...denied.auditAnnotations, reason: renderReason(violations), "break-glass": "refused" },
      ...kept(denied),
    });
  }

  const reason = input.annotations[BREAK_GLASS_REASON]!.trim();
  const ticket = input.annotations[BREAK_GLASS_TICKET]!.trim();
  const overridden = input.denials.map((d) => d.violation);
  return {
    allowed: true,
    violations: [],
    warnings: [
      ...denied.warnings,
      `break-glass override (ticket ${ticket}): ${overridden.length} image denial(s) set aside; the admission is recorded in the audit log (a dry run, or imprimatur check, records nothing): ${renderReason(overridden)}`,
      ...(access && !access.checked ? [`break-glass: who may use it was not checked (${access.why})`] : []),
    ],
    auditAnnotations: {
      ...denied.auditAnnotations,
      decision: "allowed-by-break-glass",
      "break-glass": "used",
      "break-glass-reason": reason,
      "break-glass-ticket": ticket,
      overridden: renderReason(overridden),
    },
    breakGlass: { reason, ticket, overridden },
    ...kept(denied),
  };
}

/** What the override neither sets aside nor adds: what passed, and failures that only warn or audit. */
function kept(denied: Decision): Pick<Decision, "passes" | "advisories"> {
  return { ...(denied.passes ? { passes: denied.passes } : {}), ...(denied.advisories ? { advisories: denied.advisories } : {}) };
}

/** A namespaced policy's violations name its kind. */
function kindOf(policy: { namespace?: string }): Pick<Violation, "kind"> {
  return policy.namespace === undefined ? {} : { kind: "NamespacedImagePolicy" };
}

function dedupe(vs: Violation[]): Violation[] {
  const seen = new Set<string>();
  return vs.filter((v) => {
    const k = `${v.policy}|${v.rule}|${v.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
