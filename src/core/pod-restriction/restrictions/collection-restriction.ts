// CollectionRestriction: rules about a list or map being empty. An absent list counts as empty.
import { finding, readBoolean, type CompileContext, type Finding, type Located, type RawPath } from "./restriction-support.ts";

export const COLLECTION_KEYS = ["forbidEmpty", "requireEmpty"] as const;

export interface CollectionRule {
  forbidEmpty: boolean;
  requireEmpty: boolean;
}

export function compileCollectionRule(raw: Record<string, unknown>, path: RawPath, cx: CompileContext): CollectionRule {
  const forbidEmpty = readBoolean(raw.forbidEmpty, [...path, "forbidEmpty"], cx) ?? false;
  const requireEmpty = readBoolean(raw.requireEmpty, [...path, "requireEmpty"], cx) ?? false;
  if (forbidEmpty && requireEmpty) cx.error([...path, "requireEmpty"], "contradicts forbidEmpty");
  return { forbidEmpty, requireEmpty };
}

export function isEmptyCollection(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === "object") return Object.keys(v).length === 0;
  return false;
}

/** `size` is the number of elements; `what` names them in the message ("volumes", "keys"). */
export function checkCollection(rule: CollectionRule, at: Located, size: number, ruleName: string, what: string, out: Finding[]): void {
  if (rule.forbidEmpty && size === 0) out.push(finding(at, ruleName, `is empty; must have at least one of ${what}`));
  if (rule.requireEmpty && size > 0) out.push(finding(at, ruleName, `has ${size} ${what}; must be empty`));
}
