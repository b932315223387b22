// From a policy's `spec.matchConstraints` and `spec.matchConditions` to a RequestMatch, for every policy kind.
// Checked here in full (the PodRestriction kind has no schema pass before its compiler), with VAP's rules: every
// list of a resource rule non-empty, operations among CREATE, UPDATE and "*" (the only ones Imprimatur is sent),
// condition names unique, at most 64 conditions. An exclusion that covers the whole match, or an empty
// resourceRules or subjects, is a load error: such a policy would apply to nothing.
import { compileCel } from "../conditions/cel-expression.ts";
import { isObject } from "../primitives/json-shapes.ts";
import { compileLabelSelector } from "../label-selector.ts";
import type { FieldIssue } from "../policy-kind.ts";
import { unknownFieldMessage } from "../primitives/unknown-field.ts";
import { listCovers, resourcePatternCovers, type MatchCondition, type RequestMatch, type RequestSubject, type ResourceRule } from "./request-match.ts";

type Path = Array<string | number>;

/** The variables a match condition may use, as in ValidatingAdmissionPolicy. */
export const MATCH_CONDITION_VARIABLES = ["object", "oldObject", "request", "namespaceObject"] as const;
const MAX_MATCH_CONDITIONS = 64;
const OPERATIONS = ["CREATE", "UPDATE", "*"];
const SUBJECT_KINDS = ["User", "Group", "ServiceAccount"] as const;
const CONSTRAINT_FIELDS = ["resourceRules", "excludeResourceRules", "namespaceSelector", "objectSelector", "subjects", "excludeSubjects"];
const CONDITION_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Undefined `match` when the spec has neither field (the policy is for every request its kind reviews). */
export function compileRequestMatch(spec: Record<string, unknown>): { match?: RequestMatch; issues: FieldIssue[] } {
  const issues: FieldIssue[] = [];
  const match: RequestMatch = {};
  if (spec.matchConstraints !== undefined) compileConstraints(spec.matchConstraints, ["spec", "matchConstraints"], match, issues);
  if (spec.matchConditions !== undefined) compileConditions(spec.matchConditions, ["spec", "matchConditions"], match, issues);
  if (issues.length === 0) issues.push(...contradictions(match));
  if (issues.length > 0) return { issues };
  return Object.keys(match).length > 0 ? { match, issues } : { issues };
}

function compileConstraints(raw: unknown, path: Path, match: RequestMatch, issues: FieldIssue[]): void {
  if (!isObject(raw)) return void issues.push({ path, message: "must be a mapping" });
  unknownFields(raw, CONSTRAINT_FIELDS, path, issues);
  for (const field of ["resourceRules", "excludeResourceRules"] as const) {
    if (raw[field] === undefined) continue;
    const rules = list(raw[field], [...path, field], issues)?.map((r, i) => resourceRule(r, [...path, field, i], issues));
    if (field === "resourceRules" && rules?.length === 0) issues.push({ path: [...path, field], message: emptyMatchList("every resource") });
    if (rules) match[field] = rules.filter((r): r is ResourceRule => r !== undefined);
  }
  for (const field of ["namespaceSelector", "objectSelector"] as const) {
    const selector = compileLabelSelector(raw[field], [...path, field]);
    issues.push(...selector.issues);
    if (selector.selector) match[field] = selector.selector;
  }
  for (const field of ["subjects", "excludeSubjects"] as const) {
    if (raw[field] === undefined) continue;
    const subjects = list(raw[field], [...path, field], issues)?.map((s, i) => requestSubject(s, [...path, field, i], issues));
    if (field === "subjects" && subjects?.length === 0) issues.push({ path: [...path, field], message: emptyMatchList("anyone") });
    if (subjects) match[field] = subjects.filter((s): s is RequestSubject => s !== undefined);
  }
}

// An empty list of what a policy is for matches no request: as silent a mistake as excluding everything.
const emptyMatchList = (absentMeans: string) => `is empty, so the policy would apply to nothing; leave it out for ${absentMeans}`;

function compileConditions(raw: unknown, path: Path, match: RequestMatch, issues: FieldIssue[]): void {
  const items = list(raw, path, issues);
  if (!items) return;
  if (items.length > MAX_MATCH_CONDITIONS) issues.push({ path, message: `has ${items.length} conditions; at most ${MAX_MATCH_CONDITIONS} are allowed` });
  const names = new Set<string>();
  const conditions: MatchCondition[] = [];
  items.forEach((item, i) => {
    const at = [...path, i];
    if (!isObject(item)) return void issues.push({ path: at, message: "must be a mapping with name and expression" });
    unknownFields(item, ["name", "expression"], at, issues);
    const { name, expression } = item;
    if (typeof name !== "string" || !CONDITION_NAME.test(name) || name.length > 63) {
      return void issues.push({
        path: [...at, "name"],
        message: "must be a name of letters, digits, '-', '_' and '.', starting and ending alphanumeric, at most 63 characters",
      });
    }
    if (names.has(name)) return void issues.push({ path: [...at, "name"], message: `duplicate condition name ${JSON.stringify(name)}` });
    names.add(name);
    if (typeof expression !== "string" || expression.trim() === "")
      return void issues.push({ path: [...at, "expression"], message: "must be a CEL expression" });
    try {
      conditions.push({ name, expression: compileCel(expression, MATCH_CONDITION_VARIABLES) });
    } catch (e) {
      issues.push({ path: [...at, "expression"], message: (e as Error).message });
    }
  });
  match.matchConditions = conditions;
}

function resourceRule(raw: unknown, path: Path, issues: FieldIssue[]): ResourceRule | undefined {
  if (!isObject(raw)) return void issues.push({ path, message: "must be a mapping with apiGroups, apiVersions, resources and operations" });
  const fields = ["apiGroups", "apiVersions", "resources", "operations"] as const;
  unknownFields(raw, fields, path, issues);
  const rule: Partial<ResourceRule> = {};
  for (const field of fields) {
    const values = stringList(raw[field], [...path, field], issues);
    if (values === undefined) continue;
    if (values.length === 0) {
      issues.push({ path: [...path, field], message: `is empty, so the rule would match nothing; use ["*"] for any` });
      continue;
    }
    rule[field] = values;
  }
  rule.operations?.forEach((op, i) => {
    if (!OPERATIONS.includes(op))
      issues.push({
        path: [...path, "operations", i],
        message: `must be one of ${OPERATIONS.join(", ")} (Imprimatur reviews only creations and updates), got ${JSON.stringify(op)}`,
      });
  });
  // As kube-apiserver's webhook rules: a version is never empty (a request always names one).
  rule.apiVersions?.forEach((v, i) => {
    if (v === "") issues.push({ path: [...path, "apiVersions", i], message: 'must be a version ("v1") or "*" for any, not empty' });
  });
  rule.resources?.forEach((r, i) => {
    if (r.split("/").length > 2 || r.split("/").some((part) => part === "")) {
      issues.push({
        path: [...path, "resources", i],
        message: `must be a resource ("pods", "*") or resource/subresource ("pods/ephemeralcontainers", "*/*"), got ${JSON.stringify(r)}`,
      });
    }
  });
  return fields.every((f) => rule[f] !== undefined) ? (rule as ResourceRule) : undefined;
}

function requestSubject(raw: unknown, path: Path, issues: FieldIssue[]): RequestSubject | undefined {
  if (!isObject(raw)) return void issues.push({ path, message: "must be a mapping with kind and name" });
  unknownFields(raw, ["kind", "name", "namespace"], path, issues);
  const kind = SUBJECT_KINDS.find((k) => k === raw.kind);
  if (!kind)
    return void issues.push({ path: [...path, "kind"], message: `must be one of ${SUBJECT_KINDS.join(", ")}, got ${JSON.stringify(raw.kind ?? null)}` });
  if (typeof raw.name !== "string" || raw.name === "") return void issues.push({ path: [...path, "name"], message: 'must be a name ("*" matches any)' });
  if (raw.namespace !== undefined && (kind !== "ServiceAccount" || typeof raw.namespace !== "string" || raw.namespace === "")) {
    return void issues.push({
      path: [...path, "namespace"],
      message: kind === "ServiceAccount" ? "must be a namespace name" : `applies to ServiceAccount subjects only, not ${kind}`,
    });
  }
  if (kind === "ServiceAccount" && raw.namespace === undefined)
    return void issues.push({ path: [...path, "namespace"], message: 'is required for a ServiceAccount ("*" for any)' });
  return { kind, name: raw.name, ...(typeof raw.namespace === "string" ? { namespace: raw.namespace } : {}) };
}

function unknownFields(raw: Record<string, unknown>, known: readonly string[], path: Path, issues: FieldIssue[]): void {
  for (const key of Object.keys(raw)) if (!known.includes(key)) issues.push({ path: [...path, key], message: unknownFieldMessage(key, known) });
}

function list(raw: unknown, path: Path, issues: FieldIssue[]): unknown[] | undefined {
  if (Array.isArray(raw)) return raw;
  issues.push({ path, message: "must be a list" });
  return undefined;
}

function stringList(raw: unknown, path: Path, issues: FieldIssue[]): string[] | undefined {
  if (raw === undefined) return void issues.push({ path, message: "is required" });
  if (!Array.isArray(raw) || raw.some((v) => typeof v !== "string")) return void issues.push({ path, message: "must be a list of strings" });
  return raw as string[];
}

/** Exclusions that leave nothing to match: every matched rule (or, with none, every request) excluded. */
function contradictions(match: RequestMatch): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const excluded = match.excludeResourceRules ?? [];
  const matched = match.resourceRules ?? [EVERYTHING];
  if (excluded.length > 0 && matched.every((m) => excluded.some((x) => ruleContains(x, m)))) {
    issues.push({
      path: ["spec", "matchConstraints", "excludeResourceRules"],
      message: match.resourceRules
        ? "excludes every resource that resourceRules match, so the policy would apply to nothing"
        : "excludes every request, so the policy would apply to nothing",
    });
  }
  const excludedSubjects = match.excludeSubjects ?? [];
  // Every request has a username: excluding every user excludes everything.
  const everyone = excludedSubjects.some((s) => s.kind === "User" && s.name === "*");
  const subjectsGone =
    everyone ||
    (match.subjects !== undefined &&
      match.subjects.every((s) => excludedSubjects.some((x) => x.kind === s.kind && covers(x.name, s.name) && covers(x.namespace ?? "", s.namespace ?? ""))));
  if (subjectsGone) {
    issues.push({
      path: ["spec", "matchConstraints", "excludeSubjects"],
      message: "excludes every subject the policy matches, so the policy would apply to nothing",
    });
  }
  return issues;
}

const EVERYTHING: ResourceRule = { apiGroups: ["*"], apiVersions: ["*"], resources: ["*", "*/*"], operations: ["*"] };

/**
 * Whether rule `outer` matches every request rule `inner` matches, by the matcher requests go through
 * (request-match.ts): each of inner's values is covered by outer, inner's "*" taken as a value only outer's "*"
 * covers (a "*" resource or subresource too: "*" is contained by "*" only, "*\/*" by "*\/*" only).
 */
function ruleContains(outer: ResourceRule, inner: ResourceRule): boolean {
  const coversAll = (o: readonly string[], i: readonly string[]) => i.every((v) => listCovers(o, v));
  return (
    coversAll(outer.apiGroups, inner.apiGroups) &&
    coversAll(outer.apiVersions, inner.apiVersions) &&
    coversAll(outer.operations, inner.operations) &&
    inner.resources.every((r) => {
      const [resource = "", subResource = ""] = r.split("/");
      return outer.resources.some((o) => resourcePatternCovers(o, resource, subResource));
    })
  );
}

/** A name pattern that is exactly "*" covers any; otherwise only the same text. */
function covers(pattern: string, name: string): boolean {
  return pattern === "*" || pattern === name;
}
