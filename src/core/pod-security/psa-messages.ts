// Pod Security Admission's wording, for the shipped profiles' findings. Imprimatur decides which checks a pod
// fails (the profile at the namespace's level and version, whose check names are PSA's check IDs); this file says
// it as PSA does, so that runbooks and alerts written for PSA keep matching:
//   violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "app" must set
//   securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (…), …
// One reason per failed check, with its detail in parentheses; the checks in PSA's order (the baseline check IDs
// sorted, then the restricted ones sorted: policy/registry.go). Each check's reason and detail are PSA's
// (policy/check_*.go), worded by its own file in checks/; this file hands each check its findings and joins what
// the checks say.
import type { PodUnderReview } from "../pod-under-review.ts";
import type { Finding } from "../pod-restriction/restrictions/restriction-support.ts";
import { locateFinding, podViewOf, type LocatedFinding, type PsaCheck, type PsaLevel } from "./checks/check-support.ts";
import { PSA_CHECKS } from "./checks/index.ts";

/** One failed check, as PSA's CheckResult says it. */
export interface PsaCheckResult {
  /** PSA's check ID (the profile's check name). */
  check: string;
  reason: string;
  /** Empty when PSA gives none. */
  detail: string;
}

/** PSA's AggregateCheckResult.ForbiddenDetail: `reason (detail), reason, …`. */
export function forbiddenDetail(results: readonly PsaCheckResult[]): string {
  return results.map((r) => (r.detail ? `${r.reason} (${r.detail})` : r.reason)).join(", ");
}

/** PSA's AggregateCheckResult.ForbiddenReason: the reasons alone, `reason, reason`. */
export function forbiddenReason(results: readonly PsaCheckResult[]): string {
  return results.map((r) => r.reason).join(", ");
}

/** The denial: `violates PodSecurity "restricted:latest": …` (admission/admission.go). */
export function violatesMessage(levelVersion: string, results: readonly PsaCheckResult[]): string {
  return `violates PodSecurity ${JSON.stringify(levelVersion)}: ${forbiddenDetail(results)}`;
}

/** The warning, and the audit-violations annotation: `would violate PodSecurity "restricted:latest": …`. */
export function wouldViolateMessage(levelVersion: string, results: readonly PsaCheckResult[]): string {
  return `would violate PodSecurity ${JSON.stringify(levelVersion)}: ${forbiddenDetail(results)}`;
}

const CHECKS_BY_ID: ReadonlyMap<string, PsaCheck> = new Map(PSA_CHECKS.map((c) => [c.id, c]));

/** The PSA check IDs this file words: every check of the shipped baseline and restricted profiles, in PSA's order. */
export const WORDED_CHECKS: readonly string[] = PSA_CHECKS.map((c) => c.id);

/** PSA's check ID for a finding's rule ("baseline/privileged" → privileged; restricted's procMount → procMount_restricted). */
export function psaCheckOf(rule: string): { id: string; level: PsaLevel } | undefined {
  const slash = rule.indexOf("/");
  if (slash < 0) return undefined;
  const level = rule.slice(0, slash);
  const name = rule.slice(slash + 1);
  if (level !== "baseline" && level !== "restricted") return undefined;
  if (level === "restricted" && name === "procMount") return { id: "procMount_restricted", level };
  return CHECKS_BY_ID.get(name)?.level === level ? { id: name, level } : undefined;
}

/**
 * The findings of a shipped profile (at any level and version) on one pod, as PSA's check results: one per failed
 * check, in PSA's order, each with PSA's reason and detail. Findings of checks that are not PSA's (none in the
 * shipped profiles) keep their own rule as reason, after PSA's.
 */
export function psaCheckResults(pod: PodUnderReview, findings: readonly Finding[]): PsaCheckResult[] {
  const view = podViewOf(pod);
  const foundByCheck = new Map<string, LocatedFinding[]>();
  const foreign: string[] = [];
  for (const f of findings) {
    const check = psaCheckOf(f.rule);
    if (!check) {
      if (!foreign.includes(f.rule)) foreign.push(f.rule);
      continue;
    }
    const found = foundByCheck.get(check.id) ?? [];
    found.push(locateFinding(f, pod, view));
    foundByCheck.set(check.id, found);
  }
  // PSA_CHECKS is in PSA's order, so the results are too.
  const results: PsaCheckResult[] = PSA_CHECKS.flatMap((check) => {
    const found = foundByCheck.get(check.id);
    if (!found) return [];
    const said = check.detail(view, found);
    // The profile names restricted's procMount as baseline's, and so does the result.
    return [{ check: check.id === "procMount_restricted" ? "procMount" : check.id, reason: said?.reason ?? check.reason, detail: said?.detail ?? "" }];
  });
  for (const rule of foreign) results.push({ check: rule, reason: rule, detail: "" });
  return results;
}
