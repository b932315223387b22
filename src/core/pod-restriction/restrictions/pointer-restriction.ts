// PointerRestriction: rules about a field being unset (nil) at all. The sketch spells them forbidNil and
// requireNil; the seed's examples write allowNil, so all three are read.
//
// When none is given, an unset field passes a restriction that only forbids values, and fails one that
// requires something of the value (require, ranges, allowed, regex): "runAsUser must be ≥ 1" is not met
// by leaving runAsUser to the image. Fields that are not pointers in the Pod API (hostNetwork, hostPort,
// imagePullPolicy, …) read as their zero value when absent, so these rules do not apply to them; they are
// unset only inside an absent struct, and then pass (put forbidNil on the struct to require it).
import { describe, finding, readBoolean, type CompileContext, type Finding, type Located, type RawPath } from "./restriction-support.ts";

export const POINTER_KEYS = ["allowNil", "forbidNil", "requireNil"] as const;

export interface NilRule {
  /** true: unset passes; false: unset fails; undefined: fails only if the restriction requires a value. */
  allowNil?: boolean;
  requireNil: boolean;
}

export function compileNilRule(raw: Record<string, unknown>, path: RawPath, cx: CompileContext, opts: { pointer: boolean }): NilRule {
  const allowNil = readBoolean(raw.allowNil, [...path, "allowNil"], cx);
  const forbidNil = readBoolean(raw.forbidNil, [...path, "forbidNil"], cx);
  const requireNil = readBoolean(raw.requireNil, [...path, "requireNil"], cx) ?? false;
  if (!opts.pointer) {
    for (const key of POINTER_KEYS) {
      if (raw[key] !== undefined)
        cx.error([...path, key], "this field is not a pointer in the Pod API (unset reads as its zero value), so nil rules do not apply");
    }
    // Unset only when the struct holding it is absent; then there is nothing to restrict.
    return { allowNil: true, requireNil: false };
  }
  if (allowNil !== undefined && forbidNil !== undefined && allowNil === forbidNil) {
    cx.error([...path, "forbidNil"], "contradicts allowNil");
  }
  if (requireNil && (allowNil === false || forbidNil === true)) {
    cx.error([...path, "requireNil"], "contradicts forbidNil/allowNil: false");
  }
  const rule: NilRule = { requireNil };
  if (forbidNil !== undefined) rule.allowNil = !forbidNil;
  if (allowNil !== undefined) rule.allowNil = allowNil;
  if (requireNil) rule.allowNil = true;
  return rule;
}

/**
 * Applies the nil rule. Returns true when the value is set and the caller should check it further.
 * `wanted` describes what a set value must be, for the message when it is unset.
 */
export function checkNil(rule: NilRule, at: Located, ruleName: string, valueRequired: boolean, wanted: string, out: Finding[]): boolean {
  if (at.value === undefined || at.value === null) {
    const allowed = rule.allowNil ?? !valueRequired;
    if (!allowed) out.push(finding(at, ruleName, wanted ? `is unset; must be set (${wanted})` : "is unset; must be set"));
    return false;
  }
  if (rule.requireNil) {
    out.push(finding(at, ruleName, `is set to ${describe(at.value)}; must be unset`));
    return false;
  }
  return true;
}
