// BoolRestriction: `require: true|false` plus the pointer rules.
import { checkNil, compileNilRule, POINTER_KEYS } from "./pointer-restriction.ts";
import { describe, finding, readBoolean, readMapping, type Check, type CompileContext, type RawPath } from "./restriction-support.ts";

const BOOL_KEYS = [...POINTER_KEYS, "require"] as const;

export function compileBoolRestriction(raw: unknown, path: RawPath, cx: CompileContext, opts: { pointer: boolean }, rule: string): Check | undefined {
  const obj = readMapping(raw, path, cx, BOOL_KEYS);
  if (!obj) return undefined;
  const nil = compileNilRule(obj, path, cx, opts);
  const require = readBoolean(obj.require, [...path, "require"], cx);
  const wanted = require === undefined ? "" : `to ${require}`;
  return (at, _cx, out) => {
    if (!checkNil(nil, at, rule, require !== undefined, wanted, out)) return;
    if (typeof at.value !== "boolean") out.push(finding(at, rule, `must be true or false, got ${describe(at.value)}`));
    else if (require !== undefined && at.value !== require) out.push(finding(at, rule, `is ${at.value}; must be ${require}`));
  };
}
