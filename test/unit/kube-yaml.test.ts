// Reading YAML as kubectl does, without kubectl: scalar resolution, key strings, lines of field paths and the
// errors. test/unit/kube-yaml-kubectl.test.ts compares whole documents with the real kubectl.
import { test } from "node:test";
import assert from "node:assert/strict";
import { goFloatKey, readKubeYaml, resolvePlainScalar } from "../../src/config/kube-yaml.ts";

const values = (text: string) => {
  const r = readKubeYaml(text);
  assert.deepEqual(r.errors, []);
  return r.documents.map((d) => d.value);
};

test("plain scalars resolve as go-yaml v2 resolves them", () => {
  const cases: Array<[string, unknown]> = [
    ["yes", true],
    ["Off", false],
    ["y", true],
    ["N", false],
    ["tRue", "tRue"],
    ["~", null],
    ["", null],
    ["0644", 420],
    ["0o644", 420],
    ["-017", -15],
    ["0x1F", 31],
    ["0b101", 5],
    ["1_000", 1000],
    ["1e3", 1000],
    [".5", 0.5],
    ["09", 9],
    ["-0", 0],
    ["1:20", "1:20"],
    ["2001-12-14", "2001-12-14"],
    ["1e400", "1e400"],
    [".5_0", ".5_0"],
    ["+", "+"],
    ["<<", "<<"],
  ];
  for (const [text, expected] of cases) assert.equal(resolvePlainScalar(text).value, expected, text);
  assert.equal(resolvePlainScalar("1e3").kind, "float");
  assert.equal(resolvePlainScalar("0x1F").kind, "int");
  assert.ok(Object.is(resolvePlainScalar("-0").value, 0));
  assert.equal(resolvePlainScalar(".inf").value, Infinity);
});

test("float keys are written as Go's FormatFloat(v, 'g', -1, 32)", () => {
  const cases: Array<[number, string]> = [
    [1000, "1000"],
    [1.5, "1.5"],
    [0.1, "0.1"],
    [1e20, "1e+20"],
    [1e6, "1e+06"],
    [123456, "123456"],
    [3.14159265358979, "3.1415927"],
    [0.0001, "0.0001"],
    [0.00001, "1e-05"],
    [0, "0"],
    [-2.5, "-2.5"],
    [Infinity, ".inf"],
    [-Infinity, "-.inf"],
    [NaN, ".nan"],
  ];
  for (const [v, expected] of cases) assert.equal(goFloatKey(v), expected, String(v));
});

test("merge keys apply where they stand; a list's earlier mappings win", () => {
  assert.deepEqual(values("a: &a {x: 1, w: 1}\nb: &b {x: 2, z: 2}\nc: {x: 0, <<: *a}\nd: {<<: *a, x: 0}\ne: {<<: [*a, *b]}\n"), [
    { a: { x: 1, w: 1 }, b: { x: 2, z: 2 }, c: { x: 1, w: 1 }, d: { x: 0, w: 1 }, e: { x: 1, z: 2, w: 1 } },
  ]);
  // A quoted "<<" is an ordinary key.
  assert.deepEqual(values('a: {"<<": {x: 1}}\n'), [{ a: { "<<": { x: 1 } } }]);
});

test("a key named __proto__ is a key, not a prototype", () => {
  const [doc] = values("__proto__: {polluted: true}\n") as [Record<string, unknown>];
  assert.deepEqual(Object.keys(doc), ["__proto__"]);
  assert.equal(Object.getPrototypeOf(doc), Object.prototype);
  assert.equal((doc as { polluted?: unknown }).polluted, undefined);
});

test("errors name their document and line", () => {
  assert.deepEqual(readKubeYaml("a: 1\n---\nb: 1\nc: 2\nb: 3\n").errors, [{ document: 2, line: 5, message: 'duplicate key "b" (first on line 3)' }]);
  assert.deepEqual(readKubeYaml("a: &x [*x]\n").errors, [{ document: 1, line: 1, message: 'anchor "x" refers to itself' }]);
  assert.deepEqual(readKubeYaml("a: *nope\n").errors.length, 1);
  // A second document in one piece is dropped by kubectl: an error here, on its first line.
  assert.deepEqual(readKubeYaml("a: 1\n...\nb: 2\n").errors, [
    {
      document: 2,
      line: 3,
      message: "kubectl would skip this document: it reads one document between lines that hold only ---; put a line with --- before it",
    },
  ]);
});

test("an alias bomb is an error, not hours of work", () => {
  const levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"];
  for (let i = 1; i < 8; i++)
    levels.push(
      `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10)
        .fill(`*${String.fromCharCode(96 + i)}`)
        .join(", ")}]`,
    );
  const r = readKubeYaml(`${levels.join("\n")}\n`);
  assert.equal(r.documents.length, 0);
  assert.match(r.errors[0]!.message, /excessive aliasing/);
  // Reuse that is not a bomb stays allowed, as in go-yaml: 2 000 nodes written once, reused 20 times.
  const big = `base: &b {${Array.from({ length: 2000 }, (_, i) => `k${i}: ${i}`).join(", ")}}\n${Array.from({ length: 20 }, (_, i) => `c${i}: *b`).join("\n")}\n`;
  assert.deepEqual(readKubeYaml(big).errors, []);
});

test("lines of field paths, through aliases and merge keys", () => {
  const text = ["defaults: &d", "  image: a", "  pull: yes", "spec:", "  <<: *d", "  name: x", "list:", "- one", "- two", "y: on", ""].join("\n");
  const [doc] = readKubeYaml(text).documents;
  assert.equal(doc!.lineOf(["spec", "name"]), 6);
  assert.equal(doc!.lineOf(["spec", "image"]), 2, "a merged key is where it is written");
  assert.equal(doc!.lineOf(["list", 1]), 9);
  assert.equal(doc!.lineOf(["true"]), 10, "the key y is the key true");
  assert.equal(doc!.lineOf(["spec", "missing", "deeper"]), 4);
  assert.equal(doc!.lineOf([]), 1);
});

test("JSON streams: objects one after another, lines of the whole text", () => {
  const r = readKubeYaml('\n{"a": 1}\n{"b":\n  {"c": "}{"}} {"d": [1,\n2]}\n');
  assert.deepEqual(
    r.documents.map((d) => d.value),
    [{ a: 1 }, { b: { c: "}{" } }, { d: [1, 2] }],
  );
  assert.equal(r.documents[1]!.lineOf(["b", "c"]), 4);
  assert.equal(r.documents[2]!.lineOf(["d"]), 4);
  assert.deepEqual(readKubeYaml('{"a": 1, "a": 2}').errors, [{ document: 1, line: 1, message: 'duplicate key "a" (first on line 1)' }]);
});

test("a byte-order mark and CRLF line ends change no value and no line", () => {
  const r = readKubeYaml("\ufeffa: yes\r\nb: |\r\n  x\r\nc: 0644\r\n");
  assert.deepEqual(r.documents[0]!.value, { a: true, b: "x\n", c: 420 });
  assert.equal(r.documents[0]!.lineOf(["c"]), 4);
});

test("empty and null documents are left out", () => {
  const r = readKubeYaml("---\n---\n# comment\n---\n~\n---\na: 1\n");
  assert.deepEqual(
    r.documents.map((d) => [d.document, d.value]),
    [[4, { a: 1 }]],
  );
  assert.deepEqual(readKubeYaml(""), { documents: [], errors: [] });
});
