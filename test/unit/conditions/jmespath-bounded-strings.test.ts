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
  assert.throws(() => padLeft("a", 3, "ab"), /pad_left expects its 'pad' parameter to be a valid string with a single codepoint/);
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
});
