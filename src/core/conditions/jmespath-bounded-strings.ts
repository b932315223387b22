// JMESPath's replace(), pad_left() and pad_right() (JEP-14 string functions) with bounded work. The library does
// what a count or a width says, however large: replace(s, 'b', 'x', 100000000) loops a hundred million times
// (11 s and 1.8 GB here, for a three-letter string), and pad_left(s, 1000000000) builds a string of a billion
// characters. Both are literals of the policy text, a tenant's too. These give the library's results
// wherever it gives them within the bounds, stop a replace as soon as further steps change nothing, and past
// the bounds fail with the reason (a failed condition or path: the failure policy decides).
import { ConditionError } from "./condition-error.ts";

/** The longest string one of these functions may build. Four times the largest request kube-apiserver accepts. */
export const MAX_BUILT_STRING_LENGTH = 12 * 1024 * 1024;
/** The characters a replace may copy in all its steps together. */
export const MAX_REPLACE_WORK = 64 * 1024 * 1024;

/** The library's own check and message for a count or a width. */
function nonNegativeInteger(value: unknown): number {
  if (typeof value !== "number" || value < 0 || Math.floor(value) !== value)
    throw new ConditionError("invalid-argument", "invalid-value: expecting a non-negative integer.");
  return value;
}

function checkedLength(fn: string, length: number): void {
  if (length > MAX_BUILT_STRING_LENGTH)
    throw new ConditionError("result-too-long", `${fn}: the result would be longer than ${MAX_BUILT_STRING_LENGTH} characters`);
}

/** replace(subject, old, new[, count]): every occurrence without a count; else the first one, count times over. */
export function replace(subject: string, old: string, by: string, count?: number | null): string {
  if (count === 0) return subject;
  if (count === undefined || count === null) {
    const parts = subject.split(old);
    checkedLength("replace", subject.length + (parts.length - 1) * (by.length - old.length));
    return parts.join(by);
  }
  const times = nonNegativeInteger(count);
  let work = 0;
  for (let i = 0; i < times; i++) {
    // As the library does it: String.prototype.replace with a string pattern, the first occurrence.
    const next = subject.replace(old, by);
    // A step that changes nothing leaves every later step the same: the result is reached.
    if (next === subject) break;
    checkedLength("replace", next.length);
    work += next.length;
    if (work > MAX_REPLACE_WORK)
      throw new ConditionError(
        "work-limit",
        `replace: more than ${MAX_REPLACE_WORK} characters of work (a count of ${times} on a string of ${subject.length})`,
      );
    subject = next;
  }
  return subject;
}

function padding(fn: string, width: unknown, pad: string | undefined): string {
  const chosen = pad || " ";
  if (chosen.length > 1)
    throw new ConditionError("invalid-argument", `invalid value, ${fn} expects its 'pad' parameter to be a valid string with a single codepoint`);
  checkedLength(fn, nonNegativeInteger(width));
  return chosen;
}

export function padLeft(subject: string, width: number, pad?: string): string {
  const chosen = padding("pad_left", width, pad);
  return (subject && subject.padStart(width, chosen)) || "";
}

export function padRight(subject: string, width: number, pad?: string): string {
  const chosen = padding("pad_right", width, pad);
  return (subject && subject.padEnd(width, chosen)) || "";
}
