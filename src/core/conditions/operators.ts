// The condition operators of the image-verification design, with durations and quantities compared as such.
// A comparison either holds or says, in words, what was found: "3 is not Equals 0"; a missing field fails
// every operator. Pure.
import { parseDuration } from "../primitives/duration.ts";
import type { DeepWeights } from "./json-weight.ts";
import { parseQuantity } from "./values.ts";

export const OPERATORS = [
  "Equals",
  "NotEquals",
  "In",
  "AnyIn",
  "AllIn",
  "NotIn",
  "AnyNotIn",
  "AllNotIn",
  "GreaterThan",
  "GreaterThanOrEquals",
  "LessThan",
  "LessThanOrEquals",
] as const;
export type Operator = (typeof OPERATORS)[number];

export function isOperator(value: unknown): value is Operator {
  return typeof value === "string" && (OPERATORS as readonly string[]).includes(value);
}

/** undefined when the comparison holds; otherwise why not. */
export function compare(found: unknown, operator: Operator, expected: unknown): string | undefined {
  // A missing field holds no value to compare: it fails every operator, so that an attestation without the
  // field cannot satisfy "must not be X" (NotEquals, NotIn, …) by saying nothing.
  if (found === undefined) return `the field is missing (nothing found), so it is not ${operator} ${show(expected)}`;
  if (expected === undefined) return `the value is missing (nothing found), so ${show(found)} is not ${operator} it`;
  const holds = evaluate(found, operator, expected);
  return holds ? undefined : `${show(found)} is not ${operator} ${show(expected)}`;
}

/**
 * What compare() may cost, in a CostMeter's units, before it runs: both values read whole (deep equality, the
 * message quoting them), and for the list operators each item of one list against every item of the other.
 * The values come from expressions a tenant wrote, so this is counted like the expressions themselves.
 */
export function compareCost(found: unknown, operator: Operator, expected: unknown, weights: DeepWeights): number {
  const foundWeight = weights.of(found);
  const expectedWeight = weights.of(expected);
  if (!LIST_OPERATORS.has(operator)) return foundWeight + expectedWeight;
  return foundWeight * list(expected).length + expectedWeight * list(found).length;
}

const LIST_OPERATORS: ReadonlySet<Operator> = new Set(["In", "AnyIn", "AllIn", "NotIn", "AnyNotIn", "AllNotIn"]);

function evaluate(found: unknown, operator: Operator, expected: unknown): boolean {
  switch (operator) {
    case "Equals":
      return equal(found, expected);
    case "NotEquals":
      return !equal(found, expected);
    case "In":
    case "AnyIn":
      return list(found).some((f) => list(expected).some((e) => equal(f, e)));
    case "AllIn":
      return list(found).every((f) => list(expected).some((e) => equal(f, e)));
    case "NotIn":
    case "AllNotIn":
      return list(found).every((f) => !list(expected).some((e) => equal(f, e)));
    case "AnyNotIn":
      return list(found).some((f) => !list(expected).some((e) => equal(f, e)));
    default: {
      const order = ordered(found, expected);
      if (order === undefined) return false;
      if (operator === "GreaterThan") return order > 0;
      if (operator === "GreaterThanOrEquals") return order >= 0;
      if (operator === "LessThan") return order < 0;
      return order <= 0;
    }
  }
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [value];
}

/** Durations, quantities and numbers by magnitude; other values by deep equality (numbers and numeric strings alike). */
function equal(a: unknown, b: unknown): boolean {
  const order = ordered(a, b);
  if (order !== undefined) return order === 0;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isRecord(a) && isRecord(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => k in b && equal(a[k], b[k]));
  }
  return a === b;
}

/**
 * Sign of a − b when both are comparable magnitudes of one kind; undefined otherwise. A plain number is a quantity
 * without unit, so "1Gi" compares with 1073741824; a duration compares only with a duration.
 */
function ordered(a: unknown, b: unknown): number | undefined {
  for (const parse of [asNumber, asDuration, asQuantityOrNumber]) {
    const x = parse(a);
    const y = parse(b);
    if (x !== undefined && y !== undefined) return Math.sign(x - y);
  }
  return undefined;
}

function asNumber(v: unknown): number | undefined {
  if (typeof v === "number") return Number.isFinite(v) ? v : undefined;
  if (typeof v === "string" && /^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/.test(v.trim())) return Number(v);
  return undefined;
}

/** Durations in conditions are mostly the policy's own constants ("24h"), the same on every admission. */
const parsedDurations = new Map<string, number | undefined>();
const PARSED_DURATIONS_MAX = 256;

function asDuration(v: unknown): number | undefined {
  if (typeof v !== "string") return undefined;
  if (parsedDurations.has(v)) return parsedDurations.get(v);
  if (parsedDurations.size >= PARSED_DURATIONS_MAX) parsedDurations.clear();
  const ms = parseDuration(v.trim());
  parsedDurations.set(v, ms);
  return ms;
}

function asQuantityOrNumber(v: unknown): number | undefined {
  return typeof v === "string" ? (parseQuantity(v.trim()) ?? asNumber(v)) : asNumber(v);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A value as messages show it: JSON, shortened. */
export function show(value: unknown): string {
  const text = value === undefined ? "nothing (not found)" : JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}
