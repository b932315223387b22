// The PodRestriction policy kind: a binding, and restrictions on the pod's metadata and spec. Besides the
// seed's `spec.metadata` / `spec.spec`, a policy may
//   - include a shipped profile by name (`spec.profile: restricted`), and
//   - group restrictions into named `checks`, each optionally limited by `when` / `unless` — a condition
//     written as a restriction: the check applies only to pods that satisfy `when`, and not to pods that
//     satisfy `unless`. The Pod Security Standards need this (e.g. Linux-only controls skip
//     `spec.os.name: windows` pods); names make denials say which control failed.
//
// A document is checked against the kind's JSON Schema first (pod-restriction.schema.json, the CRD's and the
// editors'): it says the document's shape down to the restrictions themselves, which mirror the Pod and are read
// by their own compilers (struct-restriction.ts and the restrictions/ folder). Only a document the schema admits is
// compiled, for what a schema cannot say: profiles that exist, check names that are unique, overrides that name a
// check, validationActions an Accept policy cannot have, the request match's semantics, the restrictions.
import { compileBinding, type BindingMode } from "./binding.ts";
import { compileObjectMetaRestriction } from "./object-meta-restriction.ts";
import { compilePodSpecRestriction } from "./pod-spec-restriction.ts";
import { CompileContext, type Check, type CompileIssue, type EvalContext, type Finding, type RawPath } from "./restrictions/restriction-support.ts";
import type { LabelSelector } from "../label-selector.ts";
import { formatFieldPath } from "../primitives/field-path.ts";
import type { PolicyOrigin } from "../policy-origin.ts";
import type { PodUnderReview } from "../pod-under-review.ts";
import { compileRequestMatch } from "../request-match/compile-request-match.ts";
import type { RequestMatch } from "../request-match/request-match.ts";
import { compileValidationActions, type ValidationAction } from "../validation-actions.ts";
import { schemaCheck } from "../schema-issues.ts";
import podRestrictionSchema from "./pod-restriction.schema.json" with { type: "json" };

export interface PodRestriction {
  name: string;
  /** Set for a NamespacedPodRestriction: its namespace (its name is then "namespace/name"; always Drop, bound there only). */
  namespace?: string;
  mode: BindingMode;
  namespaces?: string[];
  namespaceSelector?: LabelSelector;
  /** Clusters it applies to (the callers' cluster names); absent: every cluster. See cluster-scope.ts. */
  clusters?: string[];
  /** Which requests it is for (matchConstraints, matchConditions); absent: every request. See request-match/. */
  match?: RequestMatch;
  /** Profiles this policy includes, directly or through another profile. */
  profiles: string[];
  checks: RestrictionCheck[];
  /** What a failure does (Deny, Warn, Audit); absent: Deny. A check may say otherwise. */
  validationActions?: readonly ValidationAction[];
  description?: string;
  source?: PolicyOrigin;
}

interface Body {
  metadata?: Check;
  spec?: Check;
}

export interface RestrictionCheck {
  /** The check's name, prefixed with its profile's when included ("baseline/privileged"). */
  name?: string;
  description?: string;
  when?: Body;
  unless?: Body;
  body: Body;
  /** What a failure of this check does; absent: the policy's. */
  validationActions?: readonly ValidationAction[];
}

export const DESCRIPTION_ANNOTATION = "imprimatur.dev/description";

export interface CompileOptions {
  source?: PolicyOrigin;
  /** Raw profile documents by name, for `spec.profile`; a ProfileCatalog also reads versioned names (`restricted@v1.25`). */
  profiles?: ReadonlyMap<string, unknown> | ProfileCatalog;
  /** Prefix for rule labels, set when compiling a profile for inclusion ("restricted/"). */
  labelPrefix?: string;
  /** Profiles being included, to refuse cycles. */
  including?: string[];
}

/** The document's problems by the JSON Schema; none when it has the shape the compiler reads. */
const schemaIssues = schemaCheck(podRestrictionSchema);

/** A PodRestriction document as the JSON Schema admits it; the restrictions (RawBody) are read by their compilers. */
interface RawPodRestriction {
  metadata: { name: string; annotations?: Record<string, string> };
  /** Read by compileBinding. */
  binding?: unknown;
  spec?: RawSpec;
}

interface RawBody {
  metadata?: Record<string, unknown>;
  spec?: Record<string, unknown>;
}

interface RawSpec extends RawBody {
  profile?: string;
  checks?: RawCheck[];
  clusters?: string[];
  validationActions?: string[];
  /** matchConstraints and matchConditions, read by compileRequestMatch. */
  [field: string]: unknown;
}

interface RawCheck extends RawBody {
  name: string;
  description?: string;
  overrides?: string[];
  when?: RawBody;
  unless?: RawBody;
  validationActions?: string[];
}

/** A PodRestriction document (a policy's, or a profile's it includes): checked against the JSON Schema, then compiled. */
export function compilePodRestriction(raw: unknown, opts: CompileOptions = {}): { policy?: PodRestriction; issues: CompileIssue[] } {
  const shape = schemaIssues(raw);
  if (shape.length > 0) return { issues: shape };
  const document = raw as RawPodRestriction;
  const cx = new CompileContext();
  const binding = compileBinding(document.binding, ["binding"], cx);
  const policy: PodRestriction = { name: document.metadata.name, mode: binding.mode, profiles: [], checks: [] };
  if (binding.namespaces) policy.namespaces = binding.namespaces;
  if (binding.namespaceSelector) policy.namespaceSelector = binding.namespaceSelector;
  const description = document.metadata.annotations?.[DESCRIPTION_ANNOTATION];
  if (description !== undefined) policy.description = description;
  if (opts.source) policy.source = opts.source;

  const spec = document.spec ?? {};
  if (spec.validationActions !== undefined) {
    const actions = readValidationActions(spec.validationActions, ["spec", "validationActions"], cx);
    // An Accept policy only admits (the pods it accepts skip the Drop policies): it has no failure to act on.
    if (actions && binding.mode === "Accept")
      cx.error(["spec", "validationActions"], "applies to failures of Drop policies; an Accept policy admits the pods it accepts and denies none");
    else if (actions) policy.validationActions = actions;
  }
  const scope = compileRequestMatch(spec);
  for (const issue of scope.issues) cx.error(issue.path, issue.message);
  if (scope.match) policy.match = scope.match;
  if (spec.clusters) policy.clusters = spec.clusters;
  const included = spec.profile !== undefined ? includeProfile(spec.profile, policy, cx, opts) : undefined;
  const prefix = opts.labelPrefix;
  cx.ruleBase = prefix ? { depth: 1, label: prefix.replace(/\/$/, "") } : undefined;
  const body = compileBody(spec, ["spec"], cx);
  if (body.metadata || body.spec) policy.checks.push({ body });
  const overrides: Override[] = [];
  if (spec.checks) compileChecks(spec.checks, ["spec", "checks"], cx, policy, prefix ?? "", overrides);
  cx.ruleBase = undefined;
  applyOverrides(overrides, included ?? spec.profile, policy, cx);
  return cx.issues.length > 0 ? { issues: cx.issues } : { policy, issues: [] };
}

/** Profiles by name that also resolve versioned names: `restricted@v1.25` → profile `restricted` as policy version v1.25. */
export interface ProfileCatalog extends ReadonlyMap<string, unknown> {
  resolve(name: string): ProfileLookup;
}
export type ProfileLookup = { name: string; raw: unknown } | { error: string };

function lookUpProfile(name: string, profiles: CompileOptions["profiles"]): ProfileLookup {
  if (profiles && "resolve" in profiles) return profiles.resolve(name);
  const raw = profiles?.get(name);
  if (raw === undefined) return { error: `unknown profile ${JSON.stringify(name)}; shipped profiles: ${[...(profiles?.keys() ?? [])].join(", ") || "none"}` };
  return { name, raw };
}

/** Includes the named profile's checks, labelled by its plain name; returns that name (for `overrides`). */
function includeProfile(rawName: string, policy: PodRestriction, cx: CompileContext, opts: CompileOptions): string | undefined {
  const path: RawPath = ["spec", "profile"];
  const found = lookUpProfile(rawName, opts.profiles);
  if ("error" in found) return void cx.error(path, found.error);
  const { name, raw: profileRaw } = found;
  const including = opts.including ?? [];
  if (including.includes(name)) return void cx.error(path, `profile ${JSON.stringify(name)} includes itself (${[...including, name].join(" → ")})`);
  const compiled = compilePodRestriction(profileRaw, {
    ...(opts.profiles ? { profiles: opts.profiles } : {}),
    labelPrefix: `${name}/`,
    including: [...including, name],
  });
  if (!compiled.policy) {
    const reasons = compiled.issues.map((i) => (i.path.length > 0 ? `${formatFieldPath(i.path)}: ${i.message}` : i.message));
    return void cx.error(path, `profile ${JSON.stringify(rawName)} does not compile: ${reasons.join("; ")}`);
  }
  policy.profiles.push(rawName, ...compiled.policy.profiles.filter((p) => p !== rawName));
  policy.checks.push(...compiled.policy.checks);
  return name;
}

function compileBody(obj: RawBody, path: RawPath, cx: CompileContext): Body {
  const body: Body = {};
  if (obj.metadata !== undefined) {
    const m = compileObjectMetaRestriction(obj.metadata, [...path, "metadata"], cx);
    if (m) body.metadata = m;
  }
  if (obj.spec !== undefined) {
    const s = compilePodSpecRestriction(obj.spec, [...path, "spec"], cx);
    if (s) body.spec = s;
  }
  return body;
}

/** A check of this policy that takes the place of a check of the profile it includes. */
interface Override {
  name: string;
  path: RawPath;
}

/**
 * As Pod Security Admission's OverrideCheckIDs: a restricted check that is at least as strict as a baseline one
 * replaces it (restrictedVolumes replaces hostPathVolumes), so that one field is reported once, by the stricter.
 */
function applyOverrides(overrides: readonly Override[], included: string | undefined, policy: PodRestriction, cx: CompileContext): void {
  if (overrides.length === 0) return;
  const replaced = new Set<string>();
  for (const o of overrides) {
    if (included === undefined) {
      cx.error(o.path, `names a check of the included profile, but the policy includes none (spec.profile)`);
      continue;
    }
    const label = `${included}/${o.name}`;
    if (!policy.checks.some((c) => c.name === label))
      cx.error(o.path, `names ${JSON.stringify(o.name)}, which is not a check of profile ${JSON.stringify(included)}`);
    else replaced.add(label);
  }
  policy.checks = policy.checks.filter((c) => c.name === undefined || !replaced.has(c.name));
}

function compileChecks(raw: RawCheck[], path: RawPath, cx: CompileContext, policy: PodRestriction, prefix: string, overrides: Override[]): void {
  const names = new Set<string>();
  raw.forEach((obj, i) => {
    const p = [...path, i];
    obj.overrides?.forEach((name, j) => overrides.push({ name, path: [...p, "overrides", j] }));
    if (names.has(obj.name)) return cx.error([...p, "name"], `duplicate check name ${JSON.stringify(obj.name)}`);
    names.add(obj.name);
    cx.ruleBase = { depth: p.length, label: `${prefix}${obj.name}` };
    const check: RestrictionCheck = { name: `${prefix}${obj.name}`, body: compileBody(obj, p, cx) };
    if (obj.description !== undefined) check.description = obj.description;
    if (obj.validationActions !== undefined) {
      const actions = readValidationActions(obj.validationActions, [...p, "validationActions"], cx);
      if (actions && policy.mode === "Accept")
        cx.error([...p, "validationActions"], "applies to failures of Drop policies; an Accept policy admits the pods it accepts and denies none");
      else if (actions) check.validationActions = actions;
    }
    for (const cond of ["when", "unless"] as const) {
      const c = obj[cond];
      if (c) check[cond] = compileBody(c, [...p, cond], cx);
    }
    policy.checks.push(check);
  });
}

/** Every restriction of `policy` the pod fails; empty when it satisfies them all. */
export function podRestrictionFindings(policy: PodRestriction, pod: PodUnderReview): Finding[] {
  const ecx: EvalContext = { podSpec: pod.spec, isTemplate: pod.isTemplate, onlyContainers: pod.onlyContainers === true };
  const out: Finding[] = [];
  for (const check of policy.checks) {
    // When only the containers are known, conditions on the pod cannot be decided: apply every check.
    if (!ecx.onlyContainers) {
      if (check.when && !satisfies(check.when, pod, ecx)) continue;
      if (check.unless && satisfies(check.unless, pod, ecx)) continue;
    }
    const before = out.length;
    runBody(check.body, pod, ecx, out);
    const actions = check.validationActions ?? policy.validationActions;
    if (actions) for (let i = before; i < out.length; i++) out[i] = { ...out[i]!, actions };
  }
  return dedupe(out);
}

function readValidationActions(raw: unknown, path: RawPath, cx: CompileContext): ValidationAction[] | undefined {
  const compiled = compileValidationActions(raw);
  if (compiled.error) cx.error(path, compiled.error);
  return compiled.actions;
}

function runBody(body: Body, pod: PodUnderReview, ecx: EvalContext, out: Finding[]): void {
  if (!ecx.onlyContainers) body.metadata?.(pod.metadata, ecx, out);
  body.spec?.(pod.spec, ecx, out);
}

function satisfies(body: Body, pod: PodUnderReview, ecx: EvalContext): boolean {
  const out: Finding[] = [];
  runBody(body, pod, ecx, out);
  return out.length === 0;
}

/** A pod-level value inherited by several containers fails once per container; report it once. */
function dedupe(findings: Finding[]): Finding[] {
  if (findings.length < 2) return findings;
  const seen = new Set<string>();
  return findings.filter((f) => {
    const key = `${f.field}\u0000${f.rule}\u0000${f.message.replace(/ \(set at pod level, effective for [^)]*\)$/, "")}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
