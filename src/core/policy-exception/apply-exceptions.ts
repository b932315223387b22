// Applying the PolicyExceptions in force to a decision: a failure (denying or advisory) of a policy, rule or check
// an exception names, for a subject its match selects, is set aside — taken out of the failures and kept as an
// exemption naming the exception, so that the admission's warnings, its audit record and the reports all say which
// exception let what through. The request's own problems (policy "imprimatur") are never set aside. Pure.
import type { AdmissionSubject } from "../admission-subject.ts";
import { capList, moreText, renderViolation, type Decision, type Exemption, type Violation } from "../decision.ts";
import { matchesLabelSelector } from "../label-selector.ts";
import { labelsOf, REQUEST_LEVEL_POLICY, type ExceptedPolicy, type PolicyException, type ResourceFilter } from "./policy-exception-kind.ts";

/** Which exceptions are honoured: those living in a namespace serve's --exceptions-namespace names. */
export type HonouredNamespaces = ReadonlySet<string>;

/** The names ("namespace/name") of the exceptions that are not honoured: what check and serve name for their user. */
export function unhonouredExceptions(exceptions: readonly PolicyException[], honoured: HonouredNamespaces): string[] {
  return exceptions.filter((e) => !honoured.has(e.namespace)).map((e) => e.name);
}

/** The exceptions of `exceptions` that are honoured and whose match selects the subject. */
export function exceptionsFor(exceptions: readonly PolicyException[], honoured: HonouredNamespaces, subject: AdmissionSubject): PolicyException[] {
  if (exceptions.length === 0 || honoured.size === 0) return [];
  let labels: Record<string, string> | undefined;
  const selects = (filter: ResourceFilter): boolean => {
    if (filter.kinds && !filter.kinds.has(subject.object.kind)) return false;
    if (filter.namespaces && !filter.namespaces.some((m) => m(subject.namespace))) return false;
    if (filter.names && !filter.names.some((m) => m(subject.object.name))) return false;
    if (filter.selector && !matchesLabelSelector(filter.selector, (labels ??= labelsOf(subject.request.object)))) return false;
    return true;
  };
  return exceptions.filter(
    (e) => honoured.has(e.namespace) && (e.match.any === undefined || e.match.any.some(selects)) && (e.match.all === undefined || e.match.all.every(selects)),
  );
}

/** The decision with what the exceptions selecting `subject` set aside taken out; the same object when they set aside nothing. */
export function applyExceptions(decision: Decision, subject: AdmissionSubject, exceptions: readonly PolicyException[], honoured: HonouredNamespaces): Decision {
  if (decision.violations.length === 0 && (decision.advisories?.length ?? 0) === 0) return decision;
  // A denial without a failure to set aside is nothing an exception can turn into an admission.
  if (!decision.allowed && decision.violations.length === 0) return decision;
  const selecting = exceptionsFor(exceptions, honoured, subject);
  if (selecting.length === 0) return decision;

  const exemptions: Exemption[] = [];
  const keep = (failures: readonly Violation[]): Violation[] =>
    failures.filter((violation) => {
      const by = selecting.find((e) => e.exceptions.some((x) => covers(x, violation)));
      if (!by) return true;
      exemptions.push({ exception: by.name, violation });
      return false;
    });
  const violations = keep(decision.violations);
  const advisories = keep(decision.advisories ?? []);
  if (exemptions.length === 0) return decision;

  const { listed, more } = capList(exemptions);
  const warnings = listed.map((x) => `set aside by PolicyException ${x.exception}: ${renderViolation(x.violation, "violates")}`);
  if (more > 0) warnings.push(`set aside by PolicyExceptions: ${moreText(more)}`);
  const { advisories: _before, ...rest } = decision;
  const allowed = violations.length === 0 ? true : decision.allowed;
  const { decision: verdict, ...annotations } = decision.auditAnnotations;
  return {
    ...rest,
    allowed,
    violations,
    ...(advisories.length > 0 ? { advisories } : {}),
    warnings: [...decision.warnings, ...warnings],
    auditAnnotations: {
      ...annotations,
      // A denial's verdict annotation goes with the denial.
      ...(verdict !== undefined && !allowed ? { decision: verdict } : {}),
      "policy-exceptions": [...new Set(exemptions.map((x) => x.exception))].join(","),
    },
    exemptions: [...(decision.exemptions ?? []), ...exemptions],
  };
}

/** Whether an exception's entry names the policy, and the rule or check, a failure came from. */
function covers(entry: ExceptedPolicy, violation: Violation): boolean {
  if (violation.policy === REQUEST_LEVEL_POLICY || entry.policyName !== violation.policy) return false;
  if (entry.kind !== undefined && entry.kind !== (violation.kind ?? "ImagePolicy")) return false;
  return entry.ruleNames === undefined || entry.ruleNames.has(violation.rule);
}
