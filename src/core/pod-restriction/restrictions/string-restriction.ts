// StringRestriction: allowed and forbidden values (the seed's whitelist/blacklist), a regular expression (RE2
// syntax, matched against the whole value; linear-regex.ts), and the pointer rules. List entries may use "*" as a
// wildcard; for host paths the entries are path prefixes matched on whole path segments ("/var/log" covers
// "/var/log/app", not "/var/logs").
import { posix } from "node:path";
import { checkNil, compileNilRule, POINTER_KEYS } from "./pointer-restriction.ts";
import { describe, finding, readMapping, readStringList, type Check, type CompileContext, type Located, type RawPath } from "./restriction-support.ts";
import { compileGlob, hasWildcard } from "../../primitives/glob.ts";
import { compileLinearRegex, matchOutcome, type LinearRegex } from "../../primitives/linear-regex.ts";

const STRING_KEYS = [...POINTER_KEYS, "allowed", "forbidden", "regex"] as const;
export const STRING_ALIASES: Record<string, string> = { whitelist: "allowed", blacklist: "forbidden" };

export interface StringRestrictionOptions {
  /** Whether the Pod API field can be unset (a Go pointer); otherwise absent reads as "". */
  pointer: boolean;
  match?: "glob" | "pathPrefix";
}

export interface CompiledString {
  check: Check;
  /** True when the restriction requires something of the value, so an unset value fails by default. */
  valueRequired: boolean;
  /** Whether a (set) value passes the allowed/forbidden/regex rules. */
  accepts(value: string): boolean;
}

type Matcher = (value: string) => boolean;

export function compileStringRestriction(
  raw: unknown,
  path: RawPath,
  cx: CompileContext,
  opts: StringRestrictionOptions,
  rule: string,
): CompiledString | undefined {
  const obj = readMapping(raw, path, cx, STRING_KEYS, STRING_ALIASES);
  if (!obj) return undefined;
  return compileStringFrom(obj, path, cx, opts, rule);
}

/** For restriction types that embed the string keys (StringList's shorthand). */
export function compileStringFrom(
  obj: Record<string, unknown>,
  path: RawPath,
  cx: CompileContext,
  opts: StringRestrictionOptions,
  rule: string,
): CompiledString {
  const nil = compileNilRule(obj, path, cx, { pointer: opts.pointer });
  const allowed = readStringList(obj.allowed, [...path, "allowed"], cx);
  const forbidden = readStringList(obj.forbidden, [...path, "forbidden"], cx);
  let regex: LinearRegex | undefined;
  if (obj.regex !== undefined) {
    if (typeof obj.regex !== "string") cx.error([...path, "regex"], `must be a string, got ${describe(obj.regex)}`);
    else {
      const compiled = compileLinearRegex(obj.regex, "whole");
      if ("error" in compiled) cx.error([...path, "regex"], compiled.error);
      else regex = compiled.regex;
    }
  }
  // As the whole value must match, shown anchored.
  const pattern = regex && `^(?:${regex.source})$`;
  const mode = opts.match ?? "glob";
  const allowedMatch = allowed && matcherFor(allowed, mode);
  const forbiddenMatch = forbidden && matcherFor(forbidden, mode);
  const valueRequired = allowed !== undefined || regex !== undefined;

  const accepts = (value: string): boolean => {
    const v = mode === "pathPrefix" ? normalizePath(value) : value;
    if (allowedMatch && !allowedMatch(v)) return false;
    if (forbiddenMatch && forbiddenMatch(v)) return false;
    return !(regex && matchOutcome(regex, v) !== "match");
  };
  const wanted = allowed ? `one of ${list(allowed)}` : pattern ? `matching ${pattern}` : "";
  const check: Check = (at, _cx, out) => {
    if (!checkNil(nil, at, rule, valueRequired, wanted, out)) return;
    checkValue(at, out);
  };
  const checkValue = (at: Located, out: Parameters<Check>[2]) => {
    if (typeof at.value !== "string") {
      out.push(finding(at, rule, `must be a string, got ${describe(at.value)}`));
      return;
    }
    const v = mode === "pathPrefix" ? normalizePath(at.value) : at.value;
    if (allowedMatch && !allowedMatch(v)) out.push(finding(at, rule, `is ${describe(at.value)}; allowed: ${list(allowed!)}`));
    if (forbiddenMatch && forbiddenMatch(v)) out.push(finding(at, rule, `is ${describe(at.value)}, which is forbidden`));
    const outcome = regex ? matchOutcome(regex, v) : "match";
    if (outcome === "mismatch") out.push(finding(at, rule, `is ${describe(at.value)}; must match ${pattern}`));
    else if (outcome !== "match") out.push(finding(at, rule, outcome.error));
  };
  return { check, valueRequired, accepts };
}

function matcherFor(entries: string[], mode: "glob" | "pathPrefix"): Matcher {
  if (mode === "pathPrefix") {
    const prefixes = entries.map(normalizePath);
    return (v) => prefixes.some((p) => v === p || p === "/" || v.startsWith(p.endsWith("/") ? p : `${p}/`));
  }
  const exact = new Set(entries.filter((e) => !hasWildcard(e)));
  const globs = entries.filter((e) => hasWildcard(e)).map((e) => compileGlob(e));
  return globs.length === 0 ? (v) => exact.has(v) : (v) => exact.has(v) || globs.some((g) => g(v));
}

/** "/a/b/../c/" → "/a/c", so a "../" cannot walk out of an allowed prefix. */
function normalizePath(p: string): string {
  if (p === "") return p;
  const n = posix.normalize(p);
  return n.length > 1 && n.endsWith("/") ? n.slice(0, -1) : n;
}

function list(values: string[]): string {
  const shown = values
    .slice(0, 12)
    .map((v) => JSON.stringify(v))
    .join(", ");
  return values.length > 12 ? `${shown}, … (${values.length} in all)` : shown;
}
