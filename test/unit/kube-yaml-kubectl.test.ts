// The same file means the same objects to kubectl and to Imprimatur: each document of the table is converted by
// the real kubectl (`kubectl create --dry-run=client -o json`, which needs an apiserver for its REST mapping:
// the test apiserver of test/support/kube-cluster.ts) and read by Imprimatur's manifest reader, and the objects
// must be equal. kubectl runs with --validate=false: the comparison is of reading, and the client-side schema
// check is a separate step that the apiserver repeats anyway. kubectl reads manifests as unstructured JSON, so
// there is no per-field typing: `value: yes` in a string field is the boolean true for kubectl as well.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { manifestObjects } from "../../src/cli/manifests.ts";

let cluster: KubeCluster;

before(async () => {
  cluster = await startKubeCluster();
});

after(async () => {
  await cluster?.stop();
});

const cm = (name: string, body: string) => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n${body}`;

/** Documents both readers accept: the objects must be the same. */
const SAME: Array<[string, string]> = [
  ["anchors and aliases", cm("a", "data: &d\n  x: '1'\nbinaryData: {}\nimmutable: &f false\nx-copy: *d\nflag: *f\n")],
  [
    "merge keys: one, a list, overrides before and after",
    cm(
      "m",
      [
        "base: &base {k: '1', j: '3'}",
        "other: &other {k: '9', z: '8'}",
        "afterMerge: {<<: *base, k: '2'}",
        "beforeMerge: {k: '2', <<: *base}",
        "list: {<<: [*base, *other], q: 4}",
        "inline: {<<: {a: 1}, b: 2}",
        "twice: {<<: {x: 1}, <<: {x: 2, w: 3}}",
        "nested:",
        "  <<: *base",
        "  deeper: {<<: *other}",
        "",
      ].join("\n"),
    ),
  ],
  [
    "YAML 1.1 booleans and nulls",
    cm("b", "values: [y, Y, yes, Yes, YES, on, On, ON, true, True, n, N, no, No, NO, off, Off, OFF, false, FALSE, tRue, ~, null, Null, NULL, '', 'yes']\n"),
  ],
  ["1.1 booleans as keys", cm("k", "keys:\n  y: 1\n  n: 2\n  'on': 3\n  'off': 4\n")],
  [
    "numbers: octal, hex, binary, underscores, exponents",
    cm(
      "num",
      "values: [0644, 0o644, -017, 0x1F, -0x1F, 0b101, 1_000, 1e3, 1.5e3, 12e03, .5, +12, 1.0, 09, 0, -0, 1:20, 190:20:30, 100000000000000000000, 3.25]\n",
    ),
  ],
  ["numbers as keys", cm("nk", "keys:\n  0644: a\n  1e3: b\n  1.5: c\n  0.1: d\n  1e20: e\n  3.14159265358979: f\n  12345678901: g\n  0x1F: h\n  1e6: i\n")],
  [
    "timestamps stay text",
    cm("t", "values: [2001-12-14, 2001-12-14t21:59:43.10-05:00, 2001-12-14 21:59:43.10 -5, !!timestamp 2001-12-14]\ndates:\n  2001-12-14: d\n"),
  ],
  ["explicit tags", cm("tags", "values: [!!str 12, !!str yes, !!int '12', !!float 1, !!bool yes, !!null '', !!binary aGVsbG8=]\n")],
  [
    "quoting and block scalars",
    cm("q", "data:\n  a: \"line\n    folded\"\n  b: |\n    keep\n  c: >-\n    fold\n    ed\n  d: \"\\u00e9\\x41\"\n  e: 'it''s'\n  f: |+\n    trailing\n\n"),
  ],
  [
    "a Pod with 1.1 booleans and octals in typed fields",
    [
      "apiVersion: v1",
      "kind: Pod",
      "metadata: {name: p}",
      "spec:",
      "  hostNetwork: yes",
      "  containers:",
      "  - name: c",
      "    image: nginx",
      "    tty: on",
      "    stdin: Y",
      "    securityContext: {privileged: no, runAsUser: 0o1750, runAsGroup: 0644}",
      "    args: [yes, 0644, '0644', 1e3]",
      "    env:",
      "    - {name: A, value: yes}",
      "    - {name: B, value: 'yes'}",
      "",
    ].join("\n"),
  ],
  ["multi-document stream with --- and empty documents", `---\n---\n${cm("s1", "")}---\n# only a comment\n---\n${cm("s2", "")}...\n---\n${cm("s3", "")}---\n`],
  ["document end marker then separator", `${cm("e1", "")}...\n---\n${cm("e2", "")}`],
  [
    "a List kind",
    "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: l1}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: l2}\n",
  ],
  ["a typed list kind", "apiVersion: v1\nkind: ConfigMapList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: l3}\n"],
  ["JSON", '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j"},"data":{"a":"\\/x","b":"1"},"n":[1.0,1e3,-0.5]}'],
  [
    "a stream of JSON objects",
    '  {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j1"}}\n{"apiVersion":"v1","kind":"ConfigMap",\n "metadata":{"name":"j2"}}{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"j3"}}',
  ],
  ["JSON after a byte-order mark", '\ufeff{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"jb"}}'],
  ["a byte-order mark", `\ufeff${cm("bom", "data: {a: yes}\n")}`],
  ["CRLF line ends", cm("crlf", 'data:\n  x: "a\n    b"\n  y: |\n    l1\n    l2\n  z: yes\n').replaceAll("\n", "\r\n")],
  ["tabs inside values", cm("tab", 'data:\n  x:\tyes\n  y: "a\tb"\n  z: a\tb\n')],
  ["a merge into metadata", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: &meta {name: mm, labels: {app: web}}\n  annotations: {note: 'x'}\n"],
];

/** Documents kubectl refuses: Imprimatur refuses them too, naming the line. */
const BOTH_REFUSE: Array<[string, string, RegExp]> = [
  [".inf has no JSON form", cm("inf", "values: [.inf]\n"), /:5 \(document 1\): not valid YAML: \.inf cannot be converted to JSON/],
  [".nan has no JSON form", cm("nan", "values: [1, .nan]\n"), /:5 \(document 1\): not valid YAML: \.nan cannot be converted to JSON/],
  ["a null key", cm("nk", "data:\n  ~: e\n"), /:6 \(document 1\): not valid YAML: a mapping key must be a string, number or boolean, not null/],
  ["a list as a key", cm("lk", "data:\n  ? [a, b]\n  : c\n"), /:6 \(document 1\): not valid YAML: a mapping key must be/],
  ["a merge of a scalar", cm("ms", "data:\n  <<: 1\n"), /:6 \(document 1\): not valid YAML: a merge key \(<<\) takes a mapping/],
  [
    "a label that is a 1.1 boolean",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lb\n  labels:\n    enabled: yes\n",
    /:6 \(document 1\): metadata\.labels\.enabled must be a string, got true/,
  ],
  ["a name that is an octal", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 0644\n", /:4 \(document 1\): metadata\.name must be a string, got 420/],
  [
    "an annotation that is a number",
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: an\n  annotations: {a: 1}\n",
    /:5 \(document 1\): metadata\.annotations\.a must be a string, got 1/,
  ],
  [
    "an alias bomb",
    cm(
      "bomb",
      `x:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n${Array.from({ length: 7 }, (_, i) => `  ${"bcdefgh"[i]}: &${"bcdefgh"[i]} [${Array(10).fill(`*${"abcdefg"[i]}`).join(", ")}]`).join("\n")}\n`,
    ),
    /:\d+ \(document 1\): not valid YAML: the document contains excessive aliasing/,
  ],
  ["a document that is a string", "---\nhello\n", /:2 \(document 1\): not a Kubernetes object/],
  ["a document that is a list", "- apiVersion: v1\n  kind: ConfigMap\n", /:1 \(document 1\): not a Kubernetes object/],
  ["a tab as indentation", cm("ti", "data:\n\tx: 1\n"), /:6 \(document 1\): not valid YAML: Tabs are not allowed as indentation/],
];

/**
 * What kubectl v1.20 accepts silently and Imprimatur refuses, so that a file cannot mean one thing to one reader
 * and something else (or nothing) to the other: a key given twice (kubectl keeps the last; newer kubectl's
 * strict field validation refuses it) and documents kubectl drops (it reads one document between lines holding
 * only ---). The kubectl side is asserted too, so that the test says what kubectl really does.
 */
const IMPRIMATUR_REFUSES: Array<[string, string, string[], RegExp]> = [
  ["a key given twice", cm("d", "data:\n  a: '1'\n  a: '2'\n"), ["d"], /:7 \(document 1\): not valid YAML: duplicate key "a" \(first on line 6\)/],
  ["keys equal once resolved", cm("d2", "data:\n  y: '1'\n  true: '2'\n"), ["d2"], /:7 \(document 1\): not valid YAML: duplicate key "true"/],
  ["a document after ... without ---", `${cm("x1", "")}...\n${cm("x2", "")}`, ["x1"], /:6 \(document 2\): not valid YAML: kubectl would skip this document/],
  [
    "a document after --- with a comment",
    `${cm("y1", "")}--- # next\n${cm("y2", "")}`,
    ["y1"],
    /:6 \(document 2\): not valid YAML: kubectl would skip this document/,
  ],
  [
    "documents on --- lines",
    "--- {apiVersion: v1, kind: ConfigMap, metadata: {name: z1}}\n--- {apiVersion: v1, kind: ConfigMap, metadata: {name: z2}}\n",
    ["z1"],
    /:2 \(document 2\): not valid YAML: kubectl would skip/,
  ],
];

async function kubectlObjects(text: string): Promise<{ code: number; objects: unknown[]; stderr: string }> {
  const r = await cluster.kubectl(["create", "--dry-run=client", "--validate=false", "-o", "json", "-f", "-"], { input: text });
  // kubectl prints one indented JSON object per created object, each starting at the beginning of a line.
  const objects =
    r.code === 0
      ? r.stdout
          .trim()
          .split(/\n(?=\{)/)
          .map((s) => JSON.parse(s) as unknown)
      : [];
  return { code: r.code, objects, stderr: r.stderr };
}

/** kubectl fills in the namespace of its context (default) for namespaced objects that name none. */
function withoutDefaultNamespace(object: unknown): unknown {
  const o = structuredClone(object) as { metadata?: { namespace?: string } };
  if (o.metadata?.namespace === "default") delete o.metadata.namespace;
  return o;
}

function imprimaturObjects(text: string): { objects: unknown[]; problems: string[] } {
  const problems: string[] = [];
  const objects = manifestObjects(text, "f.yaml", problems);
  return { objects, problems };
}

for (const [name, text] of SAME) {
  test(`same objects: ${name}`, async () => {
    const kubectl = await kubectlObjects(text);
    assert.equal(kubectl.code, 0, kubectl.stderr);
    const ours = imprimaturObjects(text);
    assert.deepEqual(ours.problems, []);
    assert.ok(ours.objects.length > 0);
    assert.deepEqual(ours.objects, kubectl.objects.map(withoutDefaultNamespace));
  });
}

for (const [name, text, problem] of BOTH_REFUSE) {
  test(`both refuse: ${name}`, async () => {
    const kubectl = await kubectlObjects(text);
    assert.notEqual(kubectl.code, 0, "kubectl accepted it");
    assert.match(kubectl.stderr, /error/i);
    const ours = imprimaturObjects(text);
    assert.deepEqual(ours.objects, []);
    assert.equal(ours.problems.length, 1, ours.problems.join("\n"));
    assert.match(ours.problems[0]!, problem);
    assert.ok(ours.problems[0]!.startsWith("f.yaml:"));
  });
}

for (const [name, text, kubectlNames, problem] of IMPRIMATUR_REFUSES) {
  test(`kubectl v1.20 takes it silently, Imprimatur refuses: ${name}`, async () => {
    const kubectl = await kubectlObjects(text);
    assert.equal(kubectl.code, 0, kubectl.stderr);
    assert.deepEqual(
      kubectl.objects.map((o) => (o as { metadata: { name: string } }).metadata.name),
      kubectlNames,
    );
    const ours = imprimaturObjects(text);
    assert.ok(
      ours.problems.some((p) => problem.test(p)),
      ours.problems.join("\n"),
    );
  });
}

test("an empty stream: no objects for either (kubectl says so as an error)", async () => {
  for (const text of ["", "---\n", "# comment\n---\n---\n~\n"]) {
    const kubectl = await kubectlObjects(text);
    assert.match(kubectl.stderr, /no objects passed to create/);
    assert.deepEqual(imprimaturObjects(text), { objects: [], problems: [] });
  }
});
