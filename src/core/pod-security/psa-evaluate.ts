// Pod Security Admission, honoured as a drop-in: the namespace's pod-security.kubernetes.io labels (and the
// configuration's defaults) choose a level and version for each mode, the shipped profile at that level and
// version judges the pod, and the outcome is PSA's (k8s.io/pod-security-admission admission/admission.go,
// EvaluatePod and ValidatePodController):
// - enforce denies a Pod (never a workload template: Deployments, Jobs, CronJobs… only warn and audit);
// - warn adds a warning (not when the request is denied anyway);
// - audit adds the audit-violations annotation;
// - exemptions (namespace, then user, then the pod's runtime class) skip the evaluation and say why in the
//   `exempt` annotation; a namespace whose modes are all privileged is not evaluated at all.
// Pure: the compiled profiles come in through `profileAt`, the namespace's labels through the input.
//
// Audit annotation keys: kube-apiserver writes a webhook's annotations under "<webhook name>/<key>" and drops a
// key that would then hold a second "/" (admission attributes' checkKeyFormat: exactly one "/", a qualified
// name). In-tree PSA's `pod-security.kubernetes.io/audit-violations` therefore cannot be answered by a webhook;
// these keys are PSA's with a `pod-security-` prefix instead (`images.imprimatur.dev/pod-security-audit-violations`).
import type { PodRestriction } from "../pod-restriction/pod-restriction.ts";
import { podRestrictionFindings } from "../pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../pod-under-review.ts";
import { isObject } from "../primitives/json-shapes.ts";
import type { PodSecurityConfig } from "./psa-config.ts";
import {
  compareLevels,
  formatLevelVersion,
  formatVersion,
  policyOfLabels,
  renderLabelErrors,
  sameLevelVersion,
  type LevelVersion,
  type PodSecurityPolicy,
} from "./psa-labels.ts";
import { forbiddenReason, psaCheckResults, violatesMessage, wouldViolateMessage, type PsaCheckResult } from "./psa-messages.ts";

/** PSA's audit annotation keys (api/constants.go), prefixed so that a webhook can answer them (see above). */
export const POD_SECURITY_ANNOTATIONS = {
  exempt: "pod-security-exempt",
  enforcePolicy: "pod-security-enforce-policy",
  auditViolations: "pod-security-audit-violations",
  error: "pod-security-error",
} as const;

export type Exemption = "namespace" | "user" | "runtimeClass";

/** The shipped profile at a level and policy version ("latest" or a minor version the profiles know). */
export type ProfileAt = (level: "baseline" | "restricted", version: number | "latest") => PodRestriction;

export interface PodSecurityContext {
  config: PodSecurityConfig;
  profileAt: ProfileAt;
  /** The newest minor version the profiles know: a newer label is evaluated as latest, as PSA does. */
  newestMinor: number;
  /** Added to the "failed to lookup namespace" denial where labels come from the user, not the API (check). */
  unknownNamespaceHint?: string;
}

export interface PodSecurityRequest {
  namespace: string;
  /** The namespace's labels; undefined when they could not be read. */
  namespaceLabels: Readonly<Record<string, string>> | undefined;
  /** The requesting user (userInfo.username). */
  username?: string;
  /** A Pod is enforced, warned and audited; a workload's pod template only warned and audited. */
  object: "pod" | "template";
  pod: PodUnderReview;
}

export interface PodSecurityOutcome {
  allowed: boolean;
  /** PSA's denial: `violates PodSecurity "restricted:latest": …`; set when not allowed. */
  denial?: string;
  warnings: string[];
  /** Keys of POD_SECURITY_ANNOTATIONS, unprefixed as every Decision's audit annotations. */
  auditAnnotations: Record<string, string>;
  exempt?: Exemption;
  /** The enforced level's failed checks (empty when it passed or was not evaluated). */
  enforced: PsaCheckResult[];
}

/** PSA's judgement of one Pod or pod template. */
export function evaluatePodSecurity(req: PodSecurityRequest, cx: PodSecurityContext): PodSecurityOutcome {
  const { exemptions } = cx.config;
  if (req.namespace !== "" && exemptions.namespaces.includes(req.namespace)) return exempt("namespace");
  if (req.username && exemptions.usernames.includes(req.username)) return exempt("user");
  if (!req.namespaceLabels) {
    // PSA cannot look the namespace up: a Pod is refused (an internal error), a template admitted with the error.
    const error = `failed to lookup namespace ${req.namespace}`;
    const denial = cx.unknownNamespaceHint ? `${error} (${cx.unknownNamespaceHint})` : error;
    if (req.object === "pod") return { allowed: false, denial, warnings: [], auditAnnotations: { [POD_SECURITY_ANNOTATIONS.error]: error }, enforced: [] };
    return { allowed: true, warnings: [], auditAnnotations: { [POD_SECURITY_ANNOTATIONS.error]: `${error}: its labels are unknown` }, enforced: [] };
  }
  const { policy, errors } = policyOfLabels(req.namespaceLabels, cx.config.defaults);
  const enforce = req.object === "pod";
  const nothingToDo = policy.warn.level === "privileged" && policy.audit.level === "privileged" && (!enforce || policy.enforce.level === "privileged");
  if (errors.length === 0 && nothingToDo) return { allowed: true, warnings: [], auditAnnotations: {}, enforced: [] };
  const runtimeClass = isObject(req.pod.spec.value) ? req.pod.spec.value.runtimeClassName : undefined;
  if (typeof runtimeClass === "string" && runtimeClass !== "" && exemptions.runtimeClasses.includes(runtimeClass)) return exempt("runtimeClass");

  const auditAnnotations: Record<string, string> = {};
  if (errors.length > 0) auditAnnotations[POD_SECURITY_ANNOTATIONS.error] = `Failed to parse policy: ${renderLabelErrors(errors)}`;
  const results = new Map<string, PsaCheckResult[]>();
  const judge = (lv: LevelVersion): PsaCheckResult[] => {
    const key = formatLevelVersion(lv);
    let found = results.get(key);
    if (!found) {
      found = checkResults(lv, req.pod, cx);
      results.set(key, found);
    }
    return found;
  };
  const out: PodSecurityOutcome = { allowed: true, warnings: [], auditAnnotations, enforced: [] };
  if (enforce) {
    auditAnnotations[POD_SECURITY_ANNOTATIONS.enforcePolicy] = formatLevelVersion(policy.enforce);
    const failed = judge(policy.enforce);
    if (failed.length > 0) {
      out.allowed = false;
      out.denial = violatesMessage(formatLevelVersion(policy.enforce), failed);
      out.enforced = failed;
    }
  }
  const audited = judge(policy.audit);
  if (audited.length > 0) auditAnnotations[POD_SECURITY_ANNOTATIONS.auditViolations] = wouldViolateMessage(formatLevelVersion(policy.audit), audited);
  // No warning on a request that is denied anyway.
  if (out.allowed) {
    const warned = judge(policy.warn);
    if (warned.length > 0) out.warnings.push(wouldViolateMessage(formatLevelVersion(policy.warn), warned));
  }
  return out;
}

function exempt(why: Exemption): PodSecurityOutcome {
  return { allowed: true, warnings: [], auditAnnotations: { [POD_SECURITY_ANNOTATIONS.exempt]: why }, exempt: why, enforced: [] };
}

/** The failed checks of the profile at `lv` on the pod, in PSA's words; none for privileged. */
export function checkResults(lv: LevelVersion, pod: PodUnderReview, cx: PodSecurityContext): PsaCheckResult[] {
  if (lv.level === "privileged") return [];
  const version = lv.version.latest || lv.version.minor > cx.newestMinor ? "latest" : lv.version.minor;
  return psaCheckResults(pod, podRestrictionFindings(cx.profileAt(lv.level, version), pod));
}

/** A ProfileAt that compiles each level@version once, by name ("restricted", "baseline@v1.25"). */
export function cachedProfileAt(compile: (name: string) => PodRestriction): ProfileAt {
  const cache = new Map<string, PodRestriction>();
  return (level, version) => {
    const name = version === "latest" ? level : `${level}@v1.${version}`;
    let policy = cache.get(name);
    if (!policy) {
      policy = compile(name);
      cache.set(name, policy);
    }
    return policy;
  };
}

// ---- Pod updates ----

/**
 * PSA's isSignificantPodUpdate: a Pod update is judged only when an image, the number of containers or init
 * containers, a seccomp annotation, or the ephemeral containers changed; any other update is admitted unjudged.
 */
export function isSignificantPodUpdate(pod: Record<string, unknown>, oldPod: Record<string, unknown>): boolean {
  const annotations = stringMap(field(pod, "metadata", "annotations"));
  const oldAnnotations = stringMap(field(oldPod, "metadata", "annotations"));
  if (annotations["seccomp.security.alpha.kubernetes.io/pod"] !== oldAnnotations["seccomp.security.alpha.kubernetes.io/pod"]) return true;
  for (const list of ["containers", "initContainers"]) {
    const now = listOf(field(pod, "spec", list));
    const before = listOf(field(oldPod, "spec", list));
    if (now.length !== before.length) return true;
    if (now.some((c, i) => significantContainerChange(c, before[i]!, annotations, oldAnnotations))) return true;
  }
  const oldEphemeral = listOf(field(oldPod, "spec", "ephemeralContainers"));
  for (const c of listOf(field(pod, "spec", "ephemeralContainers"))) {
    const old = oldEphemeral.find((o) => o.name === c.name);
    if (!old || significantContainerChange(c, old, annotations, oldAnnotations)) return true;
  }
  return false;
}

function significantContainerChange(
  c: Record<string, unknown>,
  old: Record<string, unknown>,
  a: Record<string, string>,
  oldA: Record<string, string>,
): boolean {
  if (c.image !== old.image) return true;
  const key = `container.seccomp.security.alpha.kubernetes.io/${String(c.name ?? "")}`;
  return a[key] !== oldA[key];
}

// ---- Namespace creates and updates ----

/** PSA's limits on checking a namespace's pods when its enforce level changes (admission.go). */
export const NAMESPACE_MAX_PODS_TO_CHECK = 3000;
/** PSA's time budget for that check, in milliseconds (or half the request's remaining time, if less). */
export const NAMESPACE_POD_CHECK_BUDGET_MS = 1000;

export interface NamespaceRequest {
  operation: "CREATE" | "UPDATE";
  name: string;
  labels: Readonly<Record<string, string>> | undefined;
  oldLabels?: Readonly<Record<string, string>> | undefined;
}

export interface NamespaceCheckOptions {
  /** At most this many pods are checked (PSA: 3000). */
  maxPods?: number;
  /** Asked after each pod checked; true stops the check there (PSA: 1 s, or half the request's remaining time). */
  outOfTime?: () => boolean;
}

export interface NamespaceOutcome {
  allowed: boolean;
  /** PSA's refusal of invalid labels: `Namespace "x" is invalid: metadata.labels[…]: Invalid value: …`. */
  denial?: string;
  warnings: string[];
  auditAnnotations: Record<string, string>;
}

/**
 * PSA's ValidateNamespace: invalid pod-security labels are refused on create, and on update when they changed;
 * a stricter enforce level or a new enforce version answers with warnings naming the existing pods that would
 * violate it. `existingPods` are the namespace's Pod objects (undefined: they could not be listed). The caller
 * gives only requests without a subresource.
 */
export function checkNamespaceChange(
  req: NamespaceRequest,
  existingPods: readonly Record<string, unknown>[] | undefined,
  cx: PodSecurityContext,
  options: NamespaceCheckOptions = {},
): NamespaceOutcome {
  const next = policyOfLabels(req.labels, cx.config.defaults);
  const invalid = next.errors.length > 0 ? `Namespace ${JSON.stringify(req.name)} is invalid: ${renderLabelErrors(next.errors)}` : undefined;
  const allowed: NamespaceOutcome = { allowed: true, warnings: [], auditAnnotations: {} };
  if (req.operation === "CREATE") return invalid ? { allowed: false, denial: invalid, warnings: [], auditAnnotations: {} } : allowed;
  const before = policyOfLabels(req.oldLabels, cx.config.defaults);
  if (invalid && (before.errors.length === 0 || renderLabelErrors(before.errors) !== renderLabelErrors(next.errors)))
    return { allowed: false, denial: invalid, warnings: [], auditAnnotations: {} };
  if (!enforceTightened(before.policy, next.policy)) return allowed;
  if (cx.config.exemptions.namespaces.includes(req.name))
    return { allowed: true, warnings: [], auditAnnotations: { [POD_SECURITY_ANNOTATIONS.exempt]: "namespace" } };
  return { allowed: true, warnings: existingPodWarnings(req.name, next.policy.enforce, existingPods, cx, options), auditAnnotations: {} };
}

/** Skip the pods when the enforce policy did not change, became privileged, or was only relaxed at the same version. */
function enforceTightened(before: PodSecurityPolicy, next: PodSecurityPolicy): boolean {
  if (sameLevelVersion(before.enforce, next.enforce)) return false;
  if (next.enforce.level === "privileged") return false;
  const sameVersion = formatVersion(before.enforce.version) === formatVersion(next.enforce.version);
  return !(sameVersion && compareLevels(next.enforce.level, before.enforce.level) < 1);
}

/** EvaluatePodsInNamespace: the warnings, in PSA's order and words. */
export function existingPodWarnings(
  namespace: string,
  enforce: LevelVersion,
  existingPods: readonly Record<string, unknown>[] | undefined,
  cx: PodSecurityContext,
  options: NamespaceCheckOptions = {},
): string[] {
  if (!existingPods) return ["failed to list pods while checking new PodSecurity enforce level"];
  const maxPods = options.maxPods ?? NAMESPACE_MAX_PODS_TO_CHECK;
  const prioritized = prioritizePods(existingPods, cx.config.exemptions.runtimeClasses);
  const total = prioritized.length;
  const toCheck = prioritized.slice(0, maxPods);
  let checked = toCheck.length;
  // One warning per distinct list of reasons, naming its lexically first pod and counting the others.
  const byReason = new Map<string, { first: string; count: number }>();
  for (const [i, pod] of toCheck.entries()) {
    const failed = checkResults(enforce, podUnderReview(pod), cx);
    if (failed.length > 0) {
      const reason = forbiddenReason(failed);
      const name = String(field(pod, "metadata", "name") ?? "");
      const seen = byReason.get(reason);
      if (!seen) byReason.set(reason, { first: name, count: 1 });
      else {
        seen.count++;
        if (name < seen.first) seen.first = name;
      }
    }
    if (options.outOfTime?.()) {
      checked = i + 1;
      break;
    }
  }
  const warnings: string[] = [];
  if (checked < total) warnings.push(`new PodSecurity enforce level only checked against the first ${checked} of ${total} existing pods`);
  if (byReason.size > 0)
    warnings.push(
      `existing pods in namespace ${JSON.stringify(namespace)} violate the new PodSecurity enforce level ${JSON.stringify(formatLevelVersion(enforce))}`,
    );
  const podWarnings = [...byReason].map(([reason, { first, count }]) => {
    if (count === 1) return `${first}: ${reason}`;
    if (count === 2) return `${first} (and 1 other pod): ${reason}`;
    return `${first} (and ${count - 1} other pods): ${reason}`;
  });
  return [...warnings, ...podWarnings.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))];
}

/** PSA's prioritizePods: exempt runtime classes left out; one pod per controller first, its siblings after all others. */
function prioritizePods(pods: readonly Record<string, unknown>[], exemptRuntimeClasses: readonly string[]): Record<string, unknown>[] {
  const first: Record<string, unknown>[] = [];
  const siblings: Record<string, unknown>[] = [];
  const controllers = new Set<string>();
  for (const pod of pods) {
    const runtimeClass = field(pod, "spec", "runtimeClassName");
    if (typeof runtimeClass === "string" && runtimeClass !== "" && exemptRuntimeClasses.includes(runtimeClass)) continue;
    const controller = listOf(field(pod, "metadata", "ownerReferences")).find((o) => o.controller === true);
    const uid = controller ? String(controller.uid ?? "") : undefined;
    if (uid === undefined) first.push(pod);
    else if (controllers.has(uid)) siblings.push(pod);
    else {
      controllers.add(uid);
      first.push(pod);
    }
  }
  return [...first, ...siblings];
}

function podUnderReview(pod: Record<string, unknown>): PodUnderReview {
  return { metadata: { value: pod.metadata, field: "metadata" }, spec: { value: pod.spec, field: "spec" }, isTemplate: false };
}

function field(obj: unknown, ...path: string[]): unknown {
  let v = obj;
  for (const key of path) v = isObject(v) ? v[key] : undefined;
  return v;
}

function listOf(v: unknown): Array<Record<string, unknown>> {
  return Array.isArray(v) ? v.map((x) => (isObject(x) ? x : {})) : [];
}

function stringMap(v: unknown): Record<string, string> {
  return isObject(v) ? (v as Record<string, string>) : {};
}
