// PodRestrictionBinding: which namespaces a PodRestriction applies to, and how it combines with others.
// No binding (or one with neither namespaces nor namespaceSelector) binds cluster-wide; with both, a
// namespace must be listed AND match the selector. Mode Accept (the seed's example also writes "Allow")
// or Drop (the default).
import type { LabelSelector, LabelSelectorRequirement } from "../label-selector.ts";
import { isObject } from "../json-shapes.ts";
import { describe, readMapping, readStringList, type CompileContext, type RawPath } from "./restrictions/restriction-support.ts";

export type BindingMode = "Accept" | "Drop";

export interface Binding {
  mode: BindingMode;
  namespaces?: string[];
  namespaceSelector?: LabelSelector;
}

const OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"] as const;

export function compileBinding(raw: unknown, path: RawPath, cx: CompileContext): Binding {
  if (raw === undefined || raw === null) return { mode: "Drop" };
  const obj = readMapping(raw, path, cx, ["mode", "namespaces", "namespaceSelector"]);
  if (!obj) return { mode: "Drop" };
  let mode: BindingMode = "Drop";
  if (obj.mode !== undefined) {
    if (obj.mode === "Accept" || obj.mode === "Allow") mode = "Accept";
    else if (obj.mode !== "Drop") cx.error([...path, "mode"], `must be "Accept" or "Drop", got ${describe(obj.mode)}`);
  }
  const binding: Binding = { mode };
  const namespaces = readStringList(obj.namespaces, [...path, "namespaces"], cx);
  // An empty list would silently bind nothing; leaving it out binds every namespace.
  if (namespaces?.length === 0) cx.error([...path, "namespaces"], "is empty, so the policy would bind no namespace; omit it to bind every namespace");
  if (namespaces) binding.namespaces = namespaces;
  if (obj.namespaceSelector !== undefined) {
    const selector = compileLabelSelector(obj.namespaceSelector, [...path, "namespaceSelector"], cx);
    if (selector) binding.namespaceSelector = selector;
  }
  return binding;
}

function compileLabelSelector(raw: unknown, path: RawPath, cx: CompileContext): LabelSelector | undefined {
  const obj = readMapping(raw, path, cx, ["matchLabels", "matchExpressions"]);
  if (!obj) return undefined;
  const selector: LabelSelector = {};
  if (obj.matchLabels !== undefined) {
    if (!isObject(obj.matchLabels) || Object.values(obj.matchLabels).some((v) => typeof v !== "string")) {
      cx.error([...path, "matchLabels"], "must be a map of label → string value");
    } else selector.matchLabels = obj.matchLabels as Record<string, string>;
  }
  if (obj.matchExpressions !== undefined) {
    if (!Array.isArray(obj.matchExpressions)) cx.error([...path, "matchExpressions"], "must be a list");
    else {
      selector.matchExpressions = [];
      obj.matchExpressions.forEach((e, i) => {
        const p = [...path, "matchExpressions", i];
        const req = readMapping(e, p, cx, ["key", "operator", "values"]);
        if (!req) return;
        if (typeof req.key !== "string" || req.key === "") cx.error([...p, "key"], "must be a label key");
        const op = OPERATORS.find((o) => o === req.operator);
        if (!op) cx.error([...p, "operator"], `must be one of ${OPERATORS.join(", ")}, got ${describe(req.operator)}`);
        const values = readStringList(req.values, [...p, "values"], cx);
        const needsValues = op === "In" || op === "NotIn";
        if (op && needsValues && !values?.length) cx.error([...p, "values"], `operator ${op} needs at least one value`);
        if (op && !needsValues && values?.length) cx.error([...p, "values"], `operator ${op} takes no values`);
        if (typeof req.key === "string" && op) {
          const r: LabelSelectorRequirement = { key: req.key, operator: op };
          if (values) r.values = values;
          selector.matchExpressions!.push(r);
        }
      });
    }
  }
  return selector;
}
