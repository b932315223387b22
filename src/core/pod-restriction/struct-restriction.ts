// A restriction on a structured Pod field (securityContext, a probe, os, …): a table of its restrictable
// fields, each with its own restriction type. Absent fields of the restriction are unrestricted; the
// struct itself may carry the pointer rules (forbidNil: the struct must be present).
import { compileBoolRestriction } from "./restrictions/bool-restriction.ts";
import { compileNumericRestriction } from "./restrictions/numeric-restriction.ts";
import { checkNil, compileNilRule, POINTER_KEYS } from "./restrictions/pointer-restriction.ts";
import {
  childOf,
  describe,
  finding,
  readMapping,
  type Check,
  type CompileContext,
  type EvalContext,
  type Located,
  type RawPath,
} from "./restrictions/restriction-support.ts";
import { compileStringListRestriction } from "./restrictions/string-list-restriction.ts";
import { compileStringMapRestriction } from "./restrictions/string-map-restriction.ts";
import { compileStringRestriction } from "./restrictions/string-restriction.ts";

export interface FieldSpec {
  compile(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined;
  /** Where the value is, when it is not simply parent[key] (e.g. hostNetwork lives in the PodSpec). */
  locate?: (parent: Located, key: string, cx: EvalContext) => Located;
  /** The Go zero value an absent non-pointer field reads as. */
  zero?: unknown;
  /** When the field is checked at all (default: always). */
  appliesTo?: (cx: EvalContext) => boolean;
}

export interface StructSpec {
  fields: Record<string, FieldSpec>;
  aliases?: Record<string, string>;
  /** The struct is a pointer in the Pod API, so it may carry the pointer rules. */
  pointer: boolean;
}

export function compileStruct(raw: unknown, path: RawPath, cx: CompileContext, spec: StructSpec): Check | undefined {
  const known = [...(spec.pointer ? POINTER_KEYS : []), ...Object.keys(spec.fields)];
  const obj = readMapping(raw, path, cx, known, spec.aliases);
  if (!obj) return undefined;
  const rule = cx.rule(path);
  const nil = spec.pointer ? compileNilRule(obj, path, cx, { pointer: true }) : undefined;
  const checks: Array<{ key: string; field: FieldSpec; check: Check }> = [];
  for (const [key, field] of Object.entries(spec.fields)) {
    if (obj[key] === undefined) continue;
    const check = field.compile(obj[key], [...path, key], cx);
    if (check) checks.push({ key, field, check });
  }
  const nilMatters = nil !== undefined && (nil.allowNil !== undefined || nil.requireNil);
  // Without a nil rule an absent struct still has its fields checked (as unset): "allowPrivilegeEscalation
  // must be false" is not met by a container without a securityContext.
  return (at, ecx, out) => {
    if (at.value !== undefined && at.value !== null && (typeof at.value !== "object" || Array.isArray(at.value))) {
      out.push(finding(at, rule, `must be an object, got ${describe(at.value)}`));
      return;
    }
    if (nilMatters) {
      const before = out.length;
      checkNil(nil, at, rule, false, "", out);
      if (out.length > before) return;
      // allowNil: true on a struct says an absent struct is fine as it is.
      if (nil.allowNil === true && (at.value === undefined || at.value === null)) return;
    }
    for (const { key, field, check } of checks) {
      if (field.appliesTo && !field.appliesTo(ecx)) continue;
      check(field.locate ? field.locate(at, key, ecx) : childOf(at, key, field.zero), ecx, out);
    }
  };
}

// Field kinds. `pointer` says whether the Pod API field can be unset (a Go pointer); otherwise an absent
// field reads as its zero value ("" / 0 / false), as the apiserver itself would see it.

export function stringField(pointer: boolean, match?: "glob" | "pathPrefix"): FieldSpec {
  return {
    compile: (raw, path, cx) => compileStringRestriction(raw, path, cx, { pointer, ...(match ? { match } : {}) }, cx.rule(path))?.check,
    ...(pointer ? {} : { zero: "" }),
  };
}

export function boolField(pointer: boolean): FieldSpec {
  return { compile: (raw, path, cx) => compileBoolRestriction(raw, path, cx, { pointer }, cx.rule(path)), ...(pointer ? {} : { zero: false }) };
}

export function numberField(pointer: boolean): FieldSpec {
  return { compile: (raw, path, cx) => compileNumericRestriction(raw, path, cx, { pointer }, cx.rule(path)), ...(pointer ? {} : { zero: 0 }) };
}

export function stringListField(): FieldSpec {
  return { compile: (raw, path, cx) => compileStringListRestriction(raw, path, cx, cx.rule(path))?.check };
}

export function stringMapField(): FieldSpec {
  return { compile: (raw, path, cx) => compileStringMapRestriction(raw, path, cx, cx.rule(path)) };
}

/** A NumericRestriction applied to every element of a list of numbers (supplementalGroups). */
export function numberListField(): FieldSpec {
  return {
    compile: (raw, path, cx) => {
      const rule = cx.rule(path);
      const each = compileNumericRestriction(raw, path, cx, { pointer: false }, rule);
      if (!each) return undefined;
      return (at, ecx, out) => {
        if (at.value === undefined || at.value === null) return;
        if (!Array.isArray(at.value)) {
          out.push(finding(at, rule, `must be a list, got ${describe(at.value)}`));
          return;
        }
        at.value.forEach((v, i) => each({ value: v, field: `${at.field}[${i}]` }, ecx, out));
      };
    },
  };
}

export function structField(spec: StructSpec): FieldSpec {
  return { compile: (raw, path, cx) => compileStruct(raw, path, cx, spec) };
}

/**
 * A list of alternatives applied to one value: the value passes when any alternative passes. With one
 * alternative its findings are reported as they are; with several, the findings of all of them.
 */
export function anyOf(alternatives: Check[]): Check {
  if (alternatives.length === 1) return alternatives[0]!;
  return (at, ecx, out) => {
    const all: Parameters<Check>[2] = [];
    for (const alt of alternatives) {
      const mine: Parameters<Check>[2] = [];
      alt(at, ecx, mine);
      if (mine.length === 0) return;
      all.push(...mine);
    }
    out.push(...all);
  };
}
