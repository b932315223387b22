// What every restriction type shares: how a restriction is compiled from its YAML form (with errors that
// carry the path inside the policy), how a value of the object under review is located, and what a
// failed check reports. Restrictions compile to plain closures so evaluation allocates little.
import type { ValidationAction } from "../../decision.ts";
import { formatFieldPath } from "../../primitives/field-path.ts";
import { isObject } from "../../primitives/json-shapes.ts";
import { unknownFieldListingKnown } from "../../primitives/unknown-field.ts";
import type { Located } from "../../pod-under-review.ts";

/** Where a restriction reads a value: the pod under review says it (src/core/pod-under-review.ts). */
export type { Located };

export type RawPath = Array<string | number>;

export interface CompileIssue {
  path: RawPath;
  message: string;
}

export class CompileContext {
  readonly issues: CompileIssue[] = [];
  /** Inside a named check, rules are named by the check ("baseline/privileged") instead of a policy path. */
  ruleBase: { depth: number; label: string } | undefined;
  error(path: RawPath, message: string): void {
    this.issues.push({ path, message });
  }
  /** How a denial names the rule at `path` of the policy. */
  rule(path: RawPath): string {
    return this.ruleBase ? this.ruleBase.label : formatFieldPath(path);
  }
}

/** One failed check: where in the object, which part of the policy, and why. */
export interface Finding {
  field: string;
  rule: string;
  message: string;
  /** The validationActions of the check (or policy) that found it; absent: Deny. */
  actions?: readonly ValidationAction[];
}

export interface EvalContext {
  /** The PodSpec being reviewed (of a Pod or of a template). */
  podSpec: Located;
  /** A pod template of a workload rather than a Pod: its pods get generated names. */
  isTemplate: boolean;
  /** Only the containers are known: pod-level restrictions are skipped (see admission-plan.ts). */
  onlyContainers: boolean;
}

export type Check = (at: Located, cx: EvalContext, out: Finding[]) => void;

export function isNil(v: unknown): v is null | undefined {
  return v === undefined || v === null;
}

/**
 * The child `key` of a located value. An absent non-pointer field of a present struct reads as its Go
 * zero value; inside an absent struct every field is unset.
 */
export function childOf(parent: Located, key: string, zero?: unknown): Located {
  const found = parent.childOf?.(key);
  if (found) return isNil(found.value) && zero !== undefined && found.parentPresent ? { ...found, value: zero } : found;
  const present = isObject(parent.value);
  const value = present ? (parent.value as Record<string, unknown>)[key] : undefined;
  const child: Located = { value: isNil(value) && zero !== undefined && present ? zero : value, field: joinField(parent.field, key) };
  // A field of an inherited struct is inherited too: keep saying for which container it is effective.
  if (parent.note) child.note = parent.note;
  return child;
}

export function joinField(base: string, key: string): string {
  return base === "" ? key : `${base}.${key}`;
}

export function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (v === undefined) return "unset";
  return JSON.stringify(v) ?? String(v);
}

export function finding(at: Located, rule: string, message: string): Finding {
  return { field: at.field, rule, message: at.note ? `${message} (${at.note})` : message };
}

/**
 * The mapping at `path`, with seed-era aliases renamed to their current names and unknown keys reported.
 * Returns undefined (after reporting) when `raw` is not a mapping.
 */
export function readMapping(
  raw: unknown,
  path: RawPath,
  cx: CompileContext,
  known: readonly string[],
  aliases: Record<string, string> = {},
  /** Fields of the Pod API restricted at another place here: the unknown-field error says where. */
  elsewhere: Record<string, string> = {},
): Record<string, unknown> | undefined {
  if (!isObject(raw)) {
    cx.error(path, `must be a mapping, got ${describe(raw)}`);
    return undefined;
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    const name = Object.hasOwn(aliases, key) ? aliases[key]! : key;
    if (!known.includes(name)) {
      const moved = Object.hasOwn(elsewhere, key) ? elsewhere[key] : undefined;
      cx.error([...path, key], moved !== undefined ? `unknown field ${JSON.stringify(key)} here: ${moved}` : unknownFieldListingKnown(key, known));
      continue;
    }
    if (Object.hasOwn(out, name)) {
      cx.error([...path, key], `${JSON.stringify(key)} and ${JSON.stringify(name)} mean the same; give only one`);
      continue;
    }
    out[name] = value;
  }
  return out;
}

export function readBoolean(raw: unknown, path: RawPath, cx: CompileContext): boolean | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== "boolean") {
    cx.error(path, `must be true or false, got ${describe(raw)}`);
    return undefined;
  }
  return raw;
}

export function readStringList(raw: unknown, path: RawPath, cx: CompileContext): string[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw)) {
    cx.error(path, `must be a list of strings, got ${describe(raw)}`);
    return undefined;
  }
  const out: string[] = [];
  raw.forEach((item, i) => {
    if (typeof item === "string") out.push(item);
    else cx.error([...path, i], `must be a string, got ${describe(item)}`);
  });
  return out;
}

/** A list, or a single mapping standing for a one-element list (the seed's examples write both). */
export function readListOrOne(raw: unknown, path: RawPath, cx: CompileContext): Array<{ raw: unknown; path: RawPath }> {
  if (Array.isArray(raw)) return raw.map((item, i) => ({ raw: item, path: [...path, i] }));
  if (isObject(raw)) return [{ raw, path }];
  cx.error(path, `must be a list of mappings (or one mapping), got ${describe(raw)}`);
  return [];
}
