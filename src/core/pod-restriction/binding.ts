// PodRestrictionBinding: which namespaces a PodRestriction applies to, and how it combines with others.
// No binding (or one with neither namespaces nor namespaceSelector) binds cluster-wide; with both, a
// namespace must be listed AND match the selector. Mode Accept (the seed's example also writes "Allow")
// or Drop (the default).
import { compileLabelSelector, type LabelSelector } from "../label-selector.ts";
import { describe, readMapping, readStringList, type CompileContext, type RawPath } from "./restrictions/restriction-support.ts";

export type BindingMode = "Accept" | "Drop";

export interface Binding {
  mode: BindingMode;
  namespaces?: string[];
  namespaceSelector?: LabelSelector;
}

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
  const selector = compileLabelSelector(obj.namespaceSelector, [...path, "namespaceSelector"]);
  for (const issue of selector.issues) cx.error(issue.path, issue.message);
  if (selector.selector) binding.namespaceSelector = selector.selector;
  return binding;
}
