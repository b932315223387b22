// JMESPath's replace, pad_left and pad_right with bounded work: within the bounds the library's own results (the
// library's functions are asked first, before the policy evaluator replaces them), and past them an error with
// the reason instead of seconds of work and gigabytes of memory, through the expressions a policy writes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { search, type JSONValue } from "@jmespath-community/jmespath";
import { MAX_BUILT_STRING_LENGTH, MAX_REPLACE_WORK, padLeft, padRight, replace } from "../../../src/core/conditions/jmespath-bounded-strings.ts";
import { compileOperand, evaluateOperand } from "../../../src/core/conditions/jmespath-expression.ts";

const REPLACES: Array<[string, string, string, number | undefined]> = [
  ["abc", "b", "x", undefined],
  ["abcabc", "b", "x", 1],
  ["abcabc", "b", "x", 5],
  ["abcabc", "", "-", 3],
  ["abcabc", "", "-", undefined],
  ["abb", "ab", "a", 2],
  ["aaa", "a", "aa", 2],
  ["a$b", "$", "$$", 1],
  ["ab", "a", "$&$&", 2],
  ["", "", "x", 1],
  ["abc", "z", "y", 100_000_000],
];
const PADS: Array<[string, number, string | undefined]> = [
  ["ab", 5, undefined],
  ["ab", 5, "*"],
  ["abcdef", 3, "*"],
  ["", 4, "-"],
];
const library = (expression: string, data: JSONValue) => search(data, expression);
// Asked now, before any compileOperand registers the replacements over the library's functions.
// The library's replace would take its hundred million steps for the last case; nothing is there to replace.
const expectedReplaces = REPLACES.map(([s, old, by, count]) =>
  count === 100_000_000 ? s : library(count === undefined ? "replace(s, o, b)" : "replace(s, o, b, c)", { s, o: old, b: by, c: count ?? null }),
);
const expectedPads = PADS.map(([s, width, pad]) => [
  library(pad === undefined ? "pad_left(s, w)" : "pad_left(s, w, p)", { s, w: width, p: pad ?? null }),
  library(pad === undefined ? "pad_right(s, w)" : "pad_right(s, w, p)", { s, w: width, p: pad ?? null }),
]);

test("within the bounds, the library's results", () => {
  REPLACES.forEach(([s, old, by, count], i) => assert.equal(replace(s, old, by, count), expectedReplaces[i], JSON.stringify([s, old, by, count])));
  PADS.forEach(([s, width, pad], i) => assert.deepEqual([padLeft(s, width, pad), padRight(s, width, pad)], expectedPads[i], JSON.stringify([s, width, pad])));
  assert.throws(() => replace("a", "a", "b", -1), /invalid-value: expecting a non-negative integer/);
  assert.throws(() => padLeft("a", 1.5), /invalid-value: expecting a non-negative integer/);
  assert.throws(() => padLeft("a", 3, "ab"), {
    name: "ConditionError",
    code: "invalid-argument",
    message: /pad_left expects its 'pad' parameter to be a valid string with a single codepoint/,
  });
});

test("past them, an error with the reason, at once", { timeout: 10_000 }, () => {
  // Each step grows the string by one character: the work limit stops it long before a hundred million steps.
  assert.throws(
    () => replace("a", "a", "ab", 100_000_000),
    new RegExp(`replace: (more than ${MAX_REPLACE_WORK} characters of work|the result would be longer)`),
  );
  assert.throws(
    () => replace("x".repeat(1000), "x", "x".repeat(20_000)),
    new RegExp(`replace: the result would be longer than ${MAX_BUILT_STRING_LENGTH} characters`),
  );
  assert.throws(() => padLeft("a", 1_000_000_000), /pad_left: the result would be longer than/);
  assert.throws(() => padRight("a", MAX_BUILT_STRING_LENGTH + 1), /pad_right: the result would be longer than/);
  assert.equal(padRight("a", 3, "-"), "a--");
});

test("policies' expressions call these: a huge count or width is judged at once", { timeout: 10_000 }, () => {
  const run = (expression: string) => evaluateOperand(compileOperand(`{{ ${expression} }}`), { s: "abc" });
  assert.equal(run("replace(s, 'b', 'x', `100000000`)"), "axc");
  assert.throws(() => run("pad_left(s, `1000000000`)"), /pad_left: the result would be longer than/);
  assert.throws(() => run("replace(s, 'a', 'aa', `100000000`)"), /replace: /);
  assert.throws(() => run("pad_right(s, `1000000000`)"), /pad_right: the result would be longer than/);
  // Every form the library accepts stays accepted: the count and the pad are optional.
  assert.equal(run("replace(s, 'b', 'x')"), "axc");
  assert.equal(run("pad_left(s, `5`)"), "  abc");
  assert.equal(run("pad_left(s, `5`, '*')"), "**abc");
  assert.equal(run("pad_right(s, `5`)"), "abc  ");
  assert.equal(run("pad_right(s, `5`, '*')"), "abc**");
});

test("the bounds are exact: 12 Mi characters built and 64 Mi copied are allowed, one more is not", { timeout: 30_000 }, () => {
  assert.equal(MAX_BUILT_STRING_LENGTH, 12 * 1024 * 1024);
  assert.equal(padLeft("a", MAX_BUILT_STRING_LENGTH).length, MAX_BUILT_STRING_LENGTH);
  assert.equal(padRight("a", MAX_BUILT_STRING_LENGTH, "-").length, MAX_BUILT_STRING_LENGTH);
  assert.throws(() => padLeft("a", MAX_BUILT_STRING_LENGTH + 1), {
    name: "ConditionError",
    code: "result-too-long",
    message: "pad_left: the result would be longer than 12582912 characters",
  });
  assert.throws(() => padRight("a", MAX_BUILT_STRING_LENGTH + 1), {
    name: "ConditionError",
    code: "result-too-long",
    message: "pad_right: the result would be longer than 12582912 characters",
  });
  // Without a count the result's length is worked out before it is built: no occurrence, nothing added.
  const nearly = "x".repeat(MAX_BUILT_STRING_LENGTH - 1);
  assert.equal(replace(nearly, "a", "bb"), nearly);
  assert.equal(replace("a".repeat(MAX_BUILT_STRING_LENGTH), "a", "").length, 0, "shorter results are never refused");
  assert.throws(() => replace(`${nearly}aa`, "a", "bb"), {
    name: "ConditionError",
    code: "result-too-long",
    message: "replace: the result would be longer than 12582912 characters",
  });
  assert.equal(replace("aba", "a", "x"), "xbx", "no count: every occurrence");
  assert.equal(replace("aba", "a", "x", null), "xbx");
  // With a count each step copies the string: 64 steps of 1 Mi characters are the whole budget.
  assert.equal(MAX_REPLACE_WORK, 64 * 1024 * 1024);
  const mebi = "a".repeat(1024 * 1024);
  assert.equal(replace(mebi, "a", "b", 64).slice(0, 65), `${"b".repeat(64)}a`);
  assert.throws(() => replace(mebi, "a", "b", 65), {
    name: "ConditionError",
    code: "work-limit",
    message: "replace: more than 67108864 characters of work (a count of 65 on a string of 1048576)",
  });
});

test("a count or width of zero is allowed, a negative one is the library's error", () => {
  assert.equal(padLeft("ab", 0), "ab");
  assert.equal(padRight("ab", 0), "ab");
  assert.equal(replace("aa", "a", "b", 0), "aa");
  assert.throws(() => padLeft("ab", -1), { name: "ConditionError", code: "invalid-argument", message: "invalid-value: expecting a non-negative integer." });
  assert.throws(() => replace("aa", "a", "b", -1), {
    name: "ConditionError",
    code: "invalid-argument",
    message: "invalid-value: expecting a non-negative integer.",
  });
});

test("with a count, each step's result is bounded too: 12 Mi characters are allowed, one more is refused, by name", { timeout: 30_000 }, () => {
  const long = "x".repeat(MAX_BUILT_STRING_LENGTH);
  // One step, within the work allowed: only the length bound can refuse it.
  assert.equal(replace("a", "a", long, 1).length, MAX_BUILT_STRING_LENGTH);
  assert.throws(() => replace("ab", "a", long, 1), {
    name: "ConditionError",
    code: "result-too-long",
    message: "replace: the result would be longer than 12582912 characters",
  });
});
