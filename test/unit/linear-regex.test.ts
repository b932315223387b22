// linear-regex.ts, the one compiler of the patterns policies write: scopes, RE2's refusals with their hints, and
// the two size limits (instructions at load, instructions × characters per test).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  compileLinearRegex,
  matchOutcome,
  MAX_MATCH_WORK,
  MAX_PROGRAM_SIZE,
  RegexWorkLimitError,
  type LinearRegex,
} from "../../src/core/primitives/linear-regex.ts";

function compiled(pattern: string, scope: "anywhere" | "whole"): LinearRegex {
  const result = compileLinearRegex(pattern, scope);
  assert.ok("regex" in result, JSON.stringify(result));
  return result.regex;
}

const refusal = (pattern: string) => {
  const result = compileLinearRegex(pattern, "anywhere");
  assert.ok("error" in result, `${pattern} compiled`);
  return result.error;
};

test("anywhere searches the text, whole matches all of it; alternatives are tried whole", () => {
  const anywhere = compiled("b+|ab", "anywhere");
  const whole = compiled("b+|ab", "whole");
  assert.deepEqual(
    ["abbc", "bb", "ab", "abb"].map((t) => [anywhere.test(t), whole.test(t)]),
    [
      [true, false],
      [true, true],
      [true, true],
      [true, false],
    ],
  );
  assert.equal(whole.source, "b+|ab");
  assert.equal(compiled("^a$", "anywhere").test("a\n"), false, "$ is the end of the text, as in Go");
});

test("patterns that backtrack exponentially elsewhere are judged at once", { timeout: 10_000 }, () => {
  const text = `${"a".repeat(5000)}!`;
  for (const pattern of ["(a|a)+b", "(a+)+b", "(a|aa)+$", "(.*a){20}b", "^(\\w+\\s?)*$"])
    for (const scope of ["anywhere", "whole"] as const) assert.equal(compiled(pattern, scope).test(text), false, `${pattern} ${scope}`);
});

test("what RE2 refuses is refused with its reason, and a hint for what JavaScript has", () => {
  assert.equal(refusal("(a)\\1"), "invalid regular expression (RE2 syntax): invalid escape sequence: `\\1`: RE2 has no backreferences");
  assert.equal(refusal("x(?=a)"), "invalid regular expression (RE2 syntax): invalid or unsupported Perl syntax: `(?=`: RE2 has no look-around");
  assert.equal(refusal("x(?!a)"), "invalid regular expression (RE2 syntax): invalid or unsupported Perl syntax: `(?!`: RE2 has no look-around");
  assert.equal(refusal("(?<=a)x"), "invalid regular expression (RE2 syntax): invalid named capture: `(?<=a)x`: RE2 has no look-around");
  assert.equal(refusal("(?<!a)x"), "invalid regular expression (RE2 syntax): invalid named capture: `(?<!a)x`: RE2 has no look-around");
  assert.equal(refusal("a++"), "invalid regular expression (RE2 syntax): invalid nested repetition operator: `++`: RE2 has no possessive quantifiers");
  assert.equal(refusal("a*+"), "invalid regular expression (RE2 syntax): invalid nested repetition operator: `*+`: RE2 has no possessive quantifiers");
  // Others have RE2's words alone.
  assert.equal(refusal("a**"), "invalid regular expression (RE2 syntax): invalid nested repetition operator: `**`");
  assert.equal(refusal("(?<n"), "invalid regular expression (RE2 syntax): invalid named capture: `(?<n`");
  assert.equal(refusal("a\\Z"), "invalid regular expression (RE2 syntax): invalid escape sequence: `\\Z`");
  assert.equal(refusal("[a-"), "invalid regular expression (RE2 syntax): missing closing ]: `[a-`");
});

test("a pattern of more than MAX_PROGRAM_SIZE instructions is refused, saying how large it is", () => {
  // [a-z]{1,63} is 127 instructions.
  const large = "[a-z]{1,63}".repeat(Math.ceil(MAX_PROGRAM_SIZE / 127) + 1);
  assert.match(refusal(large), new RegExp(`^regular expression too large: \\d+ instructions compiled, at most ${MAX_PROGRAM_SIZE} \\(`));
  assert.ok("regex" in compileLinearRegex("[a-z]{1,63}".repeat(Math.floor(MAX_PROGRAM_SIZE / 127) - 1), "whole"));
});

test("a text longer than the work limit allows for the pattern is not matched: the test throws, matchOutcome says why", () => {
  const regex = compiled("[a-z]{1000}", "anywhere");
  // [a-z]{1000} compiles to 1001 instructions or so: find the longest text it may take.
  let longest = 0;
  for (let length = MAX_MATCH_WORK / 1000; length > 0; length--) {
    if (matchOutcome(regex, "a".repeat(length)) !== "match") continue;
    longest = length;
    break;
  }
  assert.ok(longest >= 1000 && longest <= MAX_MATCH_WORK / 1000, String(longest));
  assert.throws(
    () => regex.test("a".repeat(longest + 1)),
    (e: unknown) => e instanceof RegexWorkLimitError && e.code === "regex-work-limit",
  );
  const outcome = matchOutcome(regex, "a".repeat(longest + 1));
  assert.ok(typeof outcome === "object", String(outcome));
  assert.match(
    outcome.error,
    new RegExp(
      `^a value of ${longest + 1} characters is too long to match against /\\[a-z\\]\\{1000\\}/ \\(at most ${longest} for a pattern of (\\d+) instructions\\)$`,
    ),
  );
  const size = Number(/of (\d+) instructions/.exec(outcome.error)![1]);
  assert.equal(longest, Math.floor(MAX_MATCH_WORK / size));
  assert.equal(matchOutcome(regex, "a".repeat(999)), "mismatch");
});

test("a pattern of exactly MAX_PROGRAM_SIZE instructions compiles; one more instruction is refused", () => {
  // a{1000} is 1002 instructions with the match; each further literal adds one.
  const atLimit = `${"a{1000}".repeat(9)}a{998}`;
  const result = compileLinearRegex(atLimit, "whole");
  assert.ok("regex" in result, JSON.stringify(result));
  // It may test texts of MAX_MATCH_WORK / MAX_PROGRAM_SIZE characters, too few for it ever to match.
  assert.equal(result.regex.test("a".repeat(MAX_MATCH_WORK / MAX_PROGRAM_SIZE)), false);
  assert.equal(
    refusal(`${atLimit}a`),
    `regular expression too large: ${MAX_PROGRAM_SIZE + 1} instructions compiled, at most ${MAX_PROGRAM_SIZE} (shorten it or lower its repeat counts)`,
  );
});

test("a hint is given only for RE2's own reason, not for words of the pattern quoted in another refusal", () => {
  // RE2 quotes the whole pattern after an unexpected ")"; a pattern that spells a refusal gets no hint for it.
  for (const spelled of [
    "invalid escape sequence: `\\1",
    "invalid or unsupported Perl syntax: `(?=",
    "invalid named capture: `(?<=",
    "invalid nested repetition operator: `*+",
  ])
    assert.equal(refusal(`)${spelled}`), `invalid regular expression (RE2 syntax): unexpected ): \`)${spelled}\``);
});

test("matchOutcome turns only the work limit into a reason; any other error of a test is passed on", () => {
  const broken = {
    test(): boolean {
      throw new TypeError("not the work limit");
    },
  };
  assert.throws(() => matchOutcome(broken, "x"), TypeError);
});
