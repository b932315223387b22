// StringListRestriction: a restriction on every element (`values`), elements that must be present
// (`requiredValues`), and the collection rules. The string keys may also be written directly, as the
// seed's example does (`volumeType: {whitelist: […]}`), standing for `values`.
import { checkCollection, COLLECTION_KEYS, compileCollectionRule } from "./collection-restriction.ts";
import { compileStringFrom, compileStringRestriction, STRING_ALIASES, type CompiledString } from "./string-restriction.ts";
import { describe, finding, readMapping, readStringList, type Check, type CompileContext, type RawPath } from "./restriction-support.ts";

const SHORTHAND_KEYS = ["allowed", "forbidden", "regex"];
const STRING_LIST_KEYS = [...COLLECTION_KEYS, "values", "requiredValues", ...SHORTHAND_KEYS] as const;

export interface CompiledStringList {
  check: Check;
  /** The element restriction, if any (volume restrictions use it to select volume types). */
  values?: CompiledString;
}

export function compileStringListRestriction(raw: unknown, path: RawPath, cx: CompileContext, rule: string): CompiledStringList | undefined {
  const obj = readMapping(raw, path, cx, STRING_LIST_KEYS, STRING_ALIASES);
  if (!obj) return undefined;
  const collection = compileCollectionRule(obj, path, cx);
  const shorthand = SHORTHAND_KEYS.filter((k) => obj[k] !== undefined);
  let values: CompiledString | undefined;
  if (shorthand.length > 0 && obj.values !== undefined) {
    cx.error([...path, shorthand[0]!], "give element rules either under values or directly, not both");
  } else if (obj.values !== undefined) {
    values = compileStringRestriction(obj.values, [...path, "values"], cx, { pointer: false }, rule);
  } else if (shorthand.length > 0) {
    values = compileStringFrom(Object.fromEntries(shorthand.map((k) => [k, obj[k]])), path, cx, { pointer: false }, rule);
  }
  const required = readStringList(obj.requiredValues, [...path, "requiredValues"], cx) ?? [];

  const check: Check = (at, cx2, out) => {
    const list = at.value ?? [];
    if (!Array.isArray(list)) {
      out.push(finding(at, rule, `must be a list, got ${describe(at.value)}`));
      return;
    }
    checkCollection(collection, at, list.length, rule, "values", out);
    if (values) list.forEach((v, i) => values!.check({ value: v, field: `${at.field}[${i}]` }, cx2, out));
    for (const r of required) {
      if (!list.includes(r)) out.push(finding(at, rule, `is ${describe(list)}; must include ${JSON.stringify(r)}`));
    }
  };
  return { check, ...(values ? { values } : {}) };
}
