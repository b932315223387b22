// StringMapRestriction: allowed and forbidden keys, required keys, per-key value restrictions, and the
// collection rules — for labels, annotations, nodeSelector and sysctls. Key patterns may use "*".
// A requiredKeys entry may be a single-entry mapping {key: value}: the key must be present with that value
// (the seed's kube-system example writes it so). `values` checks keys that are present; an absent key is
// checked only when its restriction says forbidNil (or allowNil: false) — requiring keys is requiredKeys' job.
import { checkCollection, COLLECTION_KEYS, compileCollectionRule } from "./collection-restriction.ts";
import { compileGlob, hasWildcard } from "../../primitives/glob.ts";
import { compileStringRestriction, type CompiledString } from "./string-restriction.ts";
import { describe, finding, isNil, readMapping, readStringList, type Check, type CompileContext, type Located, type RawPath } from "./restriction-support.ts";
import { isObject } from "../../primitives/json-shapes.ts";

const STRING_MAP_KEYS = [...COLLECTION_KEYS, "allowedKeys", "forbiddenKeys", "requiredKeys", "values"] as const;
const STRING_MAP_ALIASES: Record<string, string> = {
  keyWhitelist: "allowedKeys",
  keyBlacklist: "forbiddenKeys",
  requireKeys: "requiredKeys",
  valueRestrictions: "values",
};

interface ValueRule {
  pattern: string;
  matches: (key: string) => boolean;
  restriction: CompiledString;
  /** The key must be present (explicit forbidNil / allowNil: false on an exact key). */
  mustExist: boolean;
}

export function compileStringMapRestriction(raw: unknown, path: RawPath, cx: CompileContext, rule: string): Check | undefined {
  const obj = readMapping(raw, path, cx, STRING_MAP_KEYS, STRING_MAP_ALIASES);
  if (!obj) return undefined;
  const collection = compileCollectionRule(obj, path, cx);
  const allowedKeys = keyMatcher(readStringList(obj.allowedKeys, [...path, "allowedKeys"], cx));
  const forbiddenKeys = keyMatcher(readStringList(obj.forbiddenKeys, [...path, "forbiddenKeys"], cx));
  const required = readRequiredKeys(obj.requiredKeys, [...path, "requiredKeys"], cx);
  const valueRules: ValueRule[] = [];
  if (obj.values !== undefined) {
    if (!isObject(obj.values)) cx.error([...path, "values"], `must be a mapping of key → string restriction, got ${describe(obj.values)}`);
    else {
      for (const [pattern, r] of Object.entries(obj.values)) {
        const restriction = compileStringRestriction(r, [...path, "values", pattern], cx, { pointer: true }, rule);
        if (!restriction) continue;
        const explicit = isObject(r) && (r.forbidNil === true || r.allowNil === false);
        if (explicit && pattern.includes("*"))
          cx.error([...path, "values", pattern], "a key pattern with * cannot require its key to be present; use requiredKeys");
        const glob = hasWildcard(pattern) ? compileGlob(pattern) : undefined;
        valueRules.push({ pattern, matches: glob ?? ((k) => k === pattern), restriction, mustExist: explicit && !glob });
      }
    }
  }

  return (at, cx2, out) => {
    if (!isNil(at.value) && !isObject(at.value)) {
      out.push(finding(at, rule, `must be a map, got ${describe(at.value)}`));
      return;
    }
    const map = (at.value ?? {}) as Record<string, unknown>;
    const keys = Object.keys(map);
    checkCollection(collection, at, keys.length, rule, "keys", out);
    for (const key of keys) {
      const entry = entryAt(at, key, map[key]);
      if (allowedKeys && !allowedKeys.test(key)) out.push(finding(entry, rule, `key ${JSON.stringify(key)} is not allowed (allowed: ${allowedKeys.shown})`));
      if (forbiddenKeys?.test(key)) out.push(finding(entry, rule, `key ${JSON.stringify(key)} is forbidden`));
      for (const vr of valueRules) if (vr.matches(key)) vr.restriction.check(entry, cx2, out);
    }
    for (const r of required) {
      if (!Object.hasOwn(map, r.key))
        out.push(finding(at, rule, `must have the key ${JSON.stringify(r.key)}${r.value !== undefined ? ` = ${JSON.stringify(r.value)}` : ""}`));
      else if (r.value !== undefined && map[r.key] !== r.value)
        out.push(finding(entryAt(at, r.key, map[r.key]), rule, `is ${describe(map[r.key])}; must be ${JSON.stringify(r.value)}`));
    }
    for (const vr of valueRules) {
      if (vr.mustExist && !Object.hasOwn(map, vr.pattern)) vr.restriction.check(entryAt(at, vr.pattern, undefined), cx2, out);
    }
  };
}

function entryAt(at: Located, key: string, value: unknown): Located {
  const located = at.childOf?.(key);
  return located ? { ...located, value } : { value, field: `${at.field}[${key}]`, ...(at.note ? { note: at.note } : {}) };
}

function keyMatcher(patterns: string[] | undefined): { test: (k: string) => boolean; shown: string } | undefined {
  if (!patterns) return undefined;
  const exact = new Set(patterns.filter((p) => !hasWildcard(p)));
  const globs = patterns.filter((p) => hasWildcard(p)).map((p) => compileGlob(p));
  return { test: (k) => exact.has(k) || globs.some((g) => g(k)), shown: patterns.map((p) => JSON.stringify(p)).join(", ") };
}

function readRequiredKeys(raw: unknown, path: RawPath, cx: CompileContext): Array<{ key: string; value?: string }> {
  if (raw === undefined) return [];
  if (!Array.isArray(raw)) {
    cx.error(path, `must be a list of keys, got ${describe(raw)}`);
    return [];
  }
  const out: Array<{ key: string; value?: string }> = [];
  raw.forEach((item, i) => {
    if (typeof item === "string") out.push({ key: item });
    else if (isObject(item) && Object.keys(item).length === 1 && typeof Object.values(item)[0] === "string") {
      const [key, value] = Object.entries(item)[0]!;
      out.push({ key, value: value as string });
    } else cx.error([...path, i], `must be a key, or a single {key: value} mapping, got ${describe(item)}`);
  });
  return out;
}
