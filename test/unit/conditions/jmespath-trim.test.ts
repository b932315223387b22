// JMESPath's trims, linear: the same results as the library's regular-expression trims (written out below as the
// library's source has them), for every UTF-16 code unit and for strings with line breaks, surrogate pairs and
// custom character sets, through the expressions a policy writes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { compileOperand, evaluateOperand } from "../../../src/core/conditions/jmespath-expression.ts";
import { trim, trimLeft, trimRight } from "../../../src/core/conditions/jmespath-trim.ts";

// @jmespath-community/jmespath 1.x: trimImpl with ^[set]*(.*?) and (.*?)[set]*$, set escaped or "\s\x85".
const librarySet = (chars?: string) => (chars ? chars.replace(/[-/\\^$*+?.()|[\]{}]/g, "\\$&") : "\\s\x85");
const libraryLeft = (s: string, chars?: string) => s.replace(new RegExp(`^[${librarySet(chars)}]*(.*?)`), "$1");
const libraryRight = (s: string, chars?: string) => s.replace(new RegExp(`(.*?)[${librarySet(chars)}]*$`), "$1");

test("every code unit is trimmed as the library trims it by default", () => {
  for (let unit = 0; unit <= 0xffff; unit++) {
    const s = `${String.fromCharCode(unit)}a${String.fromCharCode(unit)}`;
    assert.equal(trimLeft(s), libraryLeft(s), `U+${unit.toString(16)}`);
    assert.equal(trimRight(s), libraryRight(s), `U+${unit.toString(16)}`);
  }
});

test("line breaks, surrogate pairs, empty strings and custom sets come out as the library's", () => {
  const subjects = ["", " ", "  a  ", "a\nb \n ", "\n\na\n", "x\u2028 y \u2029", "xxaxx", "-a-", "😀a😀", "\ud83d a \ude00", "a]b]", "^a^", "a\\b\\"];
  const sets = [undefined, "", "x", "-", "]", "^", "\\", "😀", "\ud83d", " \n", "a-c", "[]", "$."];
  for (const s of subjects)
    for (const chars of sets) {
      const at = `${JSON.stringify(s)} with ${JSON.stringify(chars)}`;
      assert.equal(trimLeft(s, chars), libraryLeft(s, chars), at);
      assert.equal(trimRight(s, chars), libraryRight(s, chars), at);
      assert.equal(trim(s, chars), libraryLeft(libraryRight(s, chars), chars), at);
    }
});

test("policies' expressions call these: a long value is trimmed at once", { timeout: 10_000 }, () => {
  const long = `${" ".repeat(300_000)}x${"\t".repeat(300_000)}`;
  const run = (expression: string) => evaluateOperand(compileOperand(`{{ ${expression} }}`), { long, dashed: "--a--" });
  assert.equal(run("trim(long)"), "x");
  assert.equal(run("trim_left(long)"), `x${"\t".repeat(300_000)}`);
  assert.equal(run("length(trim_right(long))"), 300_001);
  assert.equal(run("trim(dashed, '-')"), "a");
  assert.equal(run("trim_right(dashed, '-')"), "--a");
});
