// Kubernetes label selectors (metav1.LabelSelector): matchLabels AND every matchExpression; how policies give them
// and what makes one valid, decided as kube-apiserver decides it (ValidateLabelSelector): a selector the apiserver
// would refuse in its own objects is refused when a policy loads, rather than silently matching nothing.
import { isObject } from "./primitives/json-shapes.ts";
import { unknownFieldListingKnown } from "./primitives/unknown-field.ts";
import type { FieldIssue } from "./policy-kind.ts";

export interface LabelSelectorRequirement {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export function matchesLabelSelector(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const req of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, req.key);
    const value = labels[req.key];
    switch (req.operator) {
      case "In":
        if (!has || !(req.values ?? []).includes(value!)) return false;
        break;
      case "NotIn":
        // As in Kubernetes: a missing key satisfies NotIn.
        if (has && (req.values ?? []).includes(value!)) return false;
        break;
      case "Exists":
        if (!has) return false;
        break;
      case "DoesNotExist":
        if (has) return false;
        break;
    }
  }
  return true;
}

export function describeLabelSelector(selector: LabelSelector): string {
  const parts = Object.entries(selector.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const r of selector.matchExpressions ?? []) {
    if (r.operator === "Exists") parts.push(r.key);
    else if (r.operator === "DoesNotExist") parts.push(`!${r.key}`);
    else parts.push(`${r.key} ${r.operator === "In" ? "in" : "notin"} (${(r.values ?? []).join(",")})`);
  }
  return parts.join(",") || "<everything>";
}

// Kubernetes' own patterns (k8s.io/apimachinery/pkg/util/validation): a label name is at most 63 characters of
// letters, digits, "-", "_" and "." that start and end with a letter or digit; a key may have a DNS-1123 subdomain
// (at most 253 characters) and "/" before it; a value is a name or empty.
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const NAME_RULE = "at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

/** Why `key` is not a label key (IsQualifiedName), or undefined when it is one. */
export function labelKeyProblem(key: string): string | undefined {
  const parts = key.split("/");
  if (parts.length > 2) return `${JSON.stringify(key)} is not a label key: it has more than one "/"`;
  const [prefix, name] = parts.length === 2 ? [parts[0]!, parts[1]!] : [undefined, parts[0]!];
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) {
    return `${JSON.stringify(key)} is not a label key: the prefix before "/" must be a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)`;
  }
  if (name.length > 63 || !LABEL_NAME.test(name)) {
    return `${JSON.stringify(key)} is not a label key: its name${prefix === undefined ? "" : ` after "/"`} must be ${NAME_RULE}`;
  }
  return undefined;
}

/** Why `value` is not a label value (IsValidLabelValue), or undefined when it is one. */
export function labelValueProblem(value: string): string | undefined {
  if (value === "" || (value.length <= 63 && LABEL_NAME.test(value))) return undefined;
  return `${JSON.stringify(value)} is not a label value: it must be empty or ${NAME_RULE}`;
}

const OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;

type Path = Array<string | number>;

/**
 * A label selector as a policy gives it (a namespaceSelector, an objectSelector, an exception's selector), each
 * problem an issue at its field: the shape, and what kube-apiserver's ValidateLabelSelector refuses (keys that are
 * no label keys, matchLabels values that are no label values, In and NotIn without values, Exists and
 * DoesNotExist with values). The values of In and NotIn are checked as label values too, as current Kubernetes
 * does for selectors it stores: such a value can never match a label. Every policy kind compiles its selectors
 * here, so each reports these problems in the same words, at its own `path` (kinds with a JSON Schema check it
 * first: what the schema refuses, such as an unknown operator, is reported in the schema's words).
 *
 * `selector` holds the parts that are well-formed; it is undefined when `raw` is absent (no selector, and no
 * issue) or not a mapping at all.
 */
export function compileLabelSelector(raw: unknown, path: Path): { selector?: LabelSelector; issues: FieldIssue[] } {
  const issues: FieldIssue[] = [];
  if (raw === undefined) return { issues };
  if (!isObject(raw)) {
    issues.push({ path, message: `must be a label selector (matchLabels, matchExpressions), got ${describeValue(raw)}` });
    return { issues };
  }
  for (const key of Object.keys(raw)) {
    if (key !== "matchLabels" && key !== "matchExpressions")
      issues.push({ path: [...path, key], message: unknownFieldListingKnown(key, ["matchLabels", "matchExpressions"]) });
  }
  const selector: LabelSelector = {};
  if (raw.matchLabels !== undefined) {
    const labels = compileMatchLabels(raw.matchLabels, [...path, "matchLabels"], issues);
    if (labels) selector.matchLabels = labels;
  }
  if (raw.matchExpressions !== undefined) {
    if (!Array.isArray(raw.matchExpressions))
      issues.push({ path: [...path, "matchExpressions"], message: `must be a list, got ${describeValue(raw.matchExpressions)}` });
    else {
      selector.matchExpressions = raw.matchExpressions.flatMap((e: unknown, i) => {
        const requirement = compileRequirement(e, [...path, "matchExpressions", i], issues);
        return requirement ? [requirement] : [];
      });
    }
  }
  return { selector, issues };
}

function compileMatchLabels(raw: unknown, path: Path, issues: FieldIssue[]): Record<string, string> | undefined {
  if (!isObject(raw)) {
    issues.push({ path, message: `must be a map of label key → value, got ${describeValue(raw)}` });
    return undefined;
  }
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(raw)) {
    const problem = labelKeyProblem(key) ?? (typeof value === "string" ? labelValueProblem(value) : `must be a string, got ${describeValue(value)}`);
    if (problem !== undefined) issues.push({ path: [...path, key], message: problem });
    else labels[key] = value as string;
  }
  return labels;
}

function compileRequirement(raw: unknown, path: Path, issues: FieldIssue[]): LabelSelectorRequirement | undefined {
  if (!isObject(raw)) {
    issues.push({ path, message: `must be a mapping with key, operator and values, got ${describeValue(raw)}` });
    return undefined;
  }
  const before = issues.length;
  const problem = (at: Path, message: string) => void issues.push({ path: at, message });
  for (const key of Object.keys(raw)) {
    if (key !== "key" && key !== "operator" && key !== "values") problem([...path, key], unknownFieldListingKnown(key, ["key", "operator", "values"]));
  }
  if (typeof raw.key !== "string") problem([...path, "key"], `must be a label key, got ${describeValue(raw.key)}`);
  else {
    const keyProblem = labelKeyProblem(raw.key);
    if (keyProblem !== undefined) problem([...path, "key"], keyProblem);
  }
  const operator = OPERATORS.find((o) => o === raw.operator);
  if (!operator) problem([...path, "operator"], `must be one of ${OPERATORS.join(", ")}, got ${describeValue(raw.operator)}`);
  let values: string[] | undefined;
  if (raw.values !== undefined) {
    if (!Array.isArray(raw.values)) problem([...path, "values"], `must be a list of strings, got ${describeValue(raw.values)}`);
    else {
      values = [];
      raw.values.forEach((v: unknown, i) => {
        const valueProblem = typeof v === "string" ? labelValueProblem(v) : `must be a string, got ${describeValue(v)}`;
        if (valueProblem !== undefined) problem([...path, "values", i], valueProblem);
        else values!.push(v as string);
      });
    }
  }
  if (operator === "In" || operator === "NotIn") {
    if (!Array.isArray(raw.values) || raw.values.length === 0) problem([...path, "values"], `operator ${operator} needs at least one value`);
  } else if (operator && Array.isArray(raw.values) && raw.values.length > 0) {
    problem([...path, "values"], `operator ${operator} takes no values`);
  }
  return issues.length === before ? { key: raw.key as string, operator: operator!, ...(values ? { values } : {}) } : undefined;
}

function describeValue(v: unknown): string {
  return v === undefined ? "nothing" : (JSON.stringify(v) ?? String(v));
}
