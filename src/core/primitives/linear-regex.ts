// The one way a regular expression a user writes is compiled: PodRestriction `regex`, keyless
// `subjectRegExp`/`issuerRegExp`, break-glass `ticketPattern` and CEL's `matches()` (conditions/cel-matches.ts).
// Patterns are RE2 syntax, as Go's regexp and so Kubernetes' CEL `matches()` read them, and run in time linear
// in the input: no backreferences, no look-around, no possessive quantifiers; what RE2 refuses is refused here,
// with RE2's reason. Pure.
//
// Why re2js: a maintained pure-JavaScript port of RE2/J (Go's regexp algorithms: a DFA with an NFA fallback),
// with no install script and no download at install, whose syntax errors are worded as Go's. The native `re2`
// binding builds with node-gyp or fetches a prebuilt binary at install; `re2-wasm` (C++ RE2 built to WebAssembly,
// 1.0.2) was slower here on the patterns that defeat the DFA (0.8 s where re2js took microseconds); @bufbuild/re2,
// the trimmed fork of re2js that @bufbuild/cel brings, 5 to 18 times slower on them.
//
// Linear in the input is not free of the pattern's size: the worst case is (instructions × characters) steps.
// So a pattern compiles to at most MAX_PROGRAM_SIZE instructions (RE2's own limit is a memory budget), and one
// test does at most MAX_MATCH_WORK of that product: past it the test throws RegexWorkLimitError, which each
// caller turns into a failure with the reason, never into a match or a silent mismatch.
import { RE2JS, RE2JSException } from "re2js";
import { hasErrorCode, ImprimaturError } from "../../errors/imprimatur-error.ts";

/** Compiled instructions a pattern may have (about 60 ns each per character in the worst case). */
export const MAX_PROGRAM_SIZE = 10_000;
/** Instructions × characters one test may cost: about half a second in the worst case, far less usually. */
export const MAX_MATCH_WORK = 10_000_000;

/** Where a pattern must match: anywhere in the text (as Go's MatchString), or the whole text. */
export type RegexScope = "anywhere" | "whole";

export interface LinearRegex {
  /** The pattern as written. */
  readonly source: string;
  /** Whether the pattern matches the text in its scope; throws RegexWorkLimitError when the text is too long for it. */
  test(text: string): boolean;
}

export class RegexWorkLimitError extends ImprimaturError<"regex-work-limit"> {}

export type LinearRegexResult = { regex: LinearRegex } | { error: string };

/** The compiled pattern, or why RE2 refuses it (in RE2's words, with a hint for what JavaScript has and RE2 not). */
export function compileLinearRegex(source: string, scope: RegexScope): LinearRegexResult {
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(source);
  } catch (e) {
    if (e instanceof RE2JSException) return { error: `invalid regular expression (RE2 syntax): ${refusal(e.message)}` };
    throw e;
  }
  const size = compiled.programSize();
  if (size > MAX_PROGRAM_SIZE)
    return { error: `regular expression too large: ${size} instructions compiled, at most ${MAX_PROGRAM_SIZE} (shorten it or lower its repeat counts)` };
  const maxLength = Math.floor(MAX_MATCH_WORK / Math.max(size, 1));
  return {
    regex: {
      source,
      test(text) {
        if (text.length > maxLength)
          throw new RegexWorkLimitError(
            "regex-work-limit",
            `a value of ${text.length} characters is too long to match against /${source}/ (at most ${maxLength} for a pattern of ${size} instructions)`,
          );
        return scope === "whole" ? compiled.testExact(text) : compiled.test(text);
      },
    },
  };
}

/** "match" or "mismatch", or why the test could not be made (the text too long for the pattern). */
export function matchOutcome(regex: Pick<LinearRegex, "test">, text: string): "match" | "mismatch" | { error: string } {
  try {
    return regex.test(text) ? "match" : "mismatch";
  } catch (e) {
    if (hasErrorCode(e, "regex-work-limit")) return { error: e.message };
    throw e;
  }
}

function refusal(message: string): string {
  const reason = message.replace(/^error parsing regexp: /, "");
  if (/^invalid escape sequence: `\\[1-9]/.test(reason)) return `${reason}: RE2 has no backreferences`;
  if (/^invalid or unsupported Perl syntax: `\(\?[=!]`/.test(reason) || /^invalid named capture: `\(\?<[=!]/.test(reason))
    return `${reason}: RE2 has no look-around`;
  if (/^invalid nested repetition operator: `[*+?}]\+`/.test(reason)) return `${reason}: RE2 has no possessive quantifiers`;
  return reason;
}
