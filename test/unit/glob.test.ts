// The one glob engine: "*" always; "?" and "[…]" classes when the caller's syntax has them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { compileGlob, hasWildcard, type GlobSyntax } from "../../src/core/primitives/glob.ts";

function check(pattern: string, syntax: GlobSyntax, yes: string[], no: string[]): void {
  const matches = compileGlob(pattern, syntax);
  assert.ok(matches, `${pattern} should compile`);
  for (const text of yes) assert.equal(matches(text), true, `${pattern} should match ${JSON.stringify(text)}`);
  for (const text of no) assert.equal(matches(text), false, `${pattern} should not match ${JSON.stringify(text)}`);
}

test('"*" matches any run of characters, "/", "." and newlines included; the whole text must match', () => {
  check("*", {}, ["", "a", "a/b.c", "line\nbreak"], []);
  check("a*", {}, ["a", "abc", "a/b"], ["", "ba"]);
  check("*a", {}, ["a", "cba", "x/a"], ["ab"]);
  check("a*b*c", {}, ["abc", "aXbYc", "abbc", "a/b/c", "abcbc"], ["ab", "acb", "abcx", "xabc"]);
  check("a**b", {}, ["ab", "a//b"], ["a"]);
  check("*.example.com/*", {}, ["x.example.com/a", "docker.io/team.example.com/app"], ["example.com/a"]);
  check("aa*aa", {}, ["aaaa", "aaaaa", "aa-aa"], ["aaa"]);
});

test("without wildcards a pattern is compared exactly", () => {
  check("nginx", {}, ["nginx"], ["nginx:1", "NGINX", ""]);
  check("", {}, [""], ["a"]);
});

test('"?" is one character with anyChar, and itself without', () => {
  check("a?c", { anyChar: true }, ["abc", "a/c", "a?c", "a😀c"], ["ac", "abbc"]);
  check("a?c", {}, ["a?c"], ["abc"]);
  check("*?", { anyChar: true }, ["x", "xyz"], [""]);
  check("?*?", { anyChar: true }, ["ab", "a😀"], ["a"]);
});

test("classes are Go's filepath.Match ranges with classes, literal text without", () => {
  check("x[a-c0-9]", { classes: true }, ["xa", "xc", "x5"], ["xd", "x", "xab", "x-"]);
  check("[z-a]", { classes: true }, [], ["a", "z", "m"]); // a reversed range matches nothing
  check("[*]x", { classes: true }, ["*x"], ["ax"]); // inside a class "*" is a character
  check("[^]", { classes: true }, ["^"], ["a"]); // no negation
  check("[a-z]*.io", { classes: true }, ["k.io", "k8s.io"], ["8s.io"]);
  check("x[a-c]", {}, ["x[a-c]"], ["xa"]);
  for (const malformed of ["[", "[]", "[a", "[-a]", "[a-]", "x[]]", "[a-"]) {
    assert.equal(compileGlob(malformed, { classes: true }), undefined, malformed);
  }
});

test("regex syntax in a pattern is plain text", () => {
  check("a.b", {}, ["a.b"], ["axb"]);
  check("(a|b)+$^{1}\\", {}, ["(a|b)+$^{1}\\"], ["a"]);
  check("*(x)*", { anyChar: true }, ["a(x)b"], ["axb"]);
  check("[.]*", { classes: true }, [".abc"], ["abc"]);
});

test("hasWildcard follows the syntax", () => {
  assert.equal(hasWildcard("a*"), true);
  assert.equal(hasWildcard("a?"), false);
  assert.equal(hasWildcard("a?", { anyChar: true }), true);
  assert.equal(hasWildcard("[ab]"), false);
  assert.equal(hasWildcard("[ab]", { classes: true }), true);
});

test("many stars do not backtrack exponentially", () => {
  const matches = compileGlob("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", {});
  const started = performance.now();
  assert.equal(matches("a".repeat(5_000)), false);
  assert.ok(performance.now() - started < 1_000);
});

test("a long piece between stars is placed without backtracking: its work is its length times the text's, at worst", { timeout: 10_000 }, () => {
  // Every position starts a near-miss of 999 characters: the worst case for placing "a"×1000 + "b".
  const nearMisses = `${"a".repeat(999)}c`.repeat(256);
  assert.equal(compileGlob(`*${"a".repeat(1000)}b*`)(nearMisses), false);
  assert.equal(compileGlob(`*${"?".repeat(1000)}b*`, { anyChar: true })(nearMisses), false);
  assert.equal(compileGlob(`*${"[ab]".repeat(1000)}c*`, { classes: true })!(nearMisses), false);
  assert.equal(compileGlob(`*${"a".repeat(999)}c*`)(nearMisses), true);
});

// An oracle: the backtracking regex a "*"-only glob is usually turned into (as PodRestriction value lists do).
function starRegexOracle(glob: string): (text: string) => boolean {
  const body = glob
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  const re = new RegExp(`^${body}$`, "su");
  return (text) => re.test(text);
}

test("agrees with a plain regex on random patterns and texts", () => {
  let seed = 7;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const alphabet = ["a", "b", "*", ".", "/", "?", "[", "]"];
  const word = (max: number, chars: string[]) => Array.from({ length: random(max) }, () => chars[random(chars.length)]).join("");
  for (let i = 0; i < 3_000; i++) {
    const pattern = word(7, alphabet);
    const text = word(8, ["a", "b", ".", "/", "?", "[", "]"]);
    assert.equal(compileGlob(pattern)(text), starRegexOracle(pattern)(text), `${JSON.stringify(pattern)} on ${JSON.stringify(text)}`);
    // With "?" as one character: the same regex where "?" is ".".
    const anyChar = new RegExp(`^${[...pattern].map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[.+?^${}()|[\]\\/]/g, "\\$&"))).join("")}$`, "su");
    assert.equal(compileGlob(pattern, { anyChar: true })(text), anyChar.test(text), `anyChar ${JSON.stringify(pattern)} on ${JSON.stringify(text)}`);
  }
});

test('"?" and class tails count code points back from the end, emoji and lone surrogates alike', () => {
  // The tail after the last "*" is placed by counting its characters back from the end of the text.
  check("*??", { anyChar: true }, ["😀😀", "a😀", "😀a", "\u{10000}\u{10FFFF}"], ["😀", "a"]);
  check("*?😀", { anyChar: true }, ["😀😀", "x😀😀"], ["😀"]);
  check("a*??", { anyChar: true }, ["a\u{10000}\u{10FFFF}", "a\u{10FFFF}\u{10000}"], ["a\u{10000}"]);
  // A lone surrogate (JSON strings can carry one) is one character, not half of a pair with its neighbour.
  check("*a", { anyChar: true }, ["\ud800a", "\udbffa"], ["\ud800"]);
  check("a*?", { anyChar: true }, ["a\udc00", "a\udfff", "a\ue000"], ["a"]);
  check("a*??", { anyChar: true }, ["a\ud800\ue000", "a\uff21\udc00", "a\udc00\udc00"], ["a\ud800"]);
});
