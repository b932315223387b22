// NumericRestriction: inclusive ranges, either end open ({max: 10} allows everything ≤ 10); a value must
// fall in at least one range. With no ranges any number passes; the pointer rules still apply.
import { checkNil, compileNilRule, POINTER_KEYS } from "./pointer-restriction.ts";
import { describe, finding, readMapping, type Check, type CompileContext, type Located, type RawPath } from "./restriction-support.ts";

const NUMERIC_KEYS = [...POINTER_KEYS, "ranges"] as const;

export interface NumericRange {
  min?: number;
  max?: number;
}

export function compileNumericRestriction(raw: unknown, path: RawPath, cx: CompileContext, opts: { pointer: boolean }, rule: string): Check | undefined {
  const obj = readMapping(raw, path, cx, NUMERIC_KEYS);
  if (!obj) return undefined;
  const nil = compileNilRule(obj, path, cx, opts);
  const ranges = readRanges(obj.ranges, [...path, "ranges"], cx);
  const wanted = ranges ? describeRanges(ranges) : "";
  return (at, _cx, out) => {
    if (!checkNil(nil, at, rule, ranges !== undefined && ranges.length > 0, wanted, out)) return;
    checkNumber(at, ranges, rule, out);
  };
}

function checkNumber(at: Located, ranges: NumericRange[] | undefined, rule: string, out: Parameters<Check>[2]): void {
  if (typeof at.value !== "number" || !Number.isFinite(at.value)) {
    out.push(finding(at, rule, `must be a number, got ${describe(at.value)}`));
    return;
  }
  const v = at.value;
  if (ranges && ranges.length > 0 && !ranges.some((r) => (r.min === undefined || v >= r.min) && (r.max === undefined || v <= r.max))) {
    out.push(finding(at, rule, `is ${v}; must be ${describeRanges(ranges)}`));
  }
}

function readRanges(raw: unknown, path: RawPath, cx: CompileContext): NumericRange[] | undefined {
  if (raw === undefined) return undefined;
  if (!Array.isArray(raw)) {
    cx.error(path, `must be a list of {min, max} ranges, got ${describe(raw)}`);
    return undefined;
  }
  const out: NumericRange[] = [];
  raw.forEach((item, i) => {
    const r = readMapping(item, [...path, i], cx, ["min", "max"]);
    if (!r) return;
    const range: NumericRange = {};
    for (const end of ["min", "max"] as const) {
      const v = r[end];
      if (v === undefined) continue;
      if (typeof v !== "number" || !Number.isInteger(v)) cx.error([...path, i, end], `must be an integer, got ${describe(v)}`);
      else range[end] = v;
    }
    if (range.min !== undefined && range.max !== undefined && range.min > range.max)
      cx.error([...path, i], `min ${range.min} is greater than max ${range.max}`);
    out.push(range);
  });
  return out;
}

/** The allowed numbers in words: "0", "from 1 to 10", "at least 1", "at most 10", "at most 0, or from 100 to 200". */
function describeRanges(ranges: NumericRange[]): string {
  return ranges
    .map((r) =>
      r.min !== undefined && r.max !== undefined
        ? r.min === r.max
          ? `${r.min}`
          : `from ${r.min} to ${r.max}`
        : r.min !== undefined
          ? `at least ${r.min}`
          : r.max !== undefined
            ? `at most ${r.max}`
            : "any number",
    )
    .join(", or ");
}
