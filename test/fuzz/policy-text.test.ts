// Property-based tests of policy text (src/policy/load-policies.ts, parsePolicyText): whatever a policy file holds
// (random bytes, YAML-ish noise, deep nesting, huge or multi-document streams, mutations of the policies the project
// ships, alias bombs), the loader answers with policies and located errors, never an exception, never a hang, and
// never a document that is neither a policy nor an error. Seeded: a failure prints the seed and the command that
// replays it (test/support/fuzz.ts).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { stringify } from "yaml";
import { checkProperty, fuzzRuns } from "../support/fuzz.ts";
import { docPages, fences } from "../support/docs.ts";
import { REPO_ROOT } from "../support/cli-process.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { PolicyLoadError, renderPolicyError } from "../../src/policy/policy-error.ts";
import type { ParsedPolicies } from "../../src/policy/parsed-policies.ts";
import { profileSources, shippedProfiles } from "../../src/policy/profiles.ts";
import { readKubeYaml } from "../../src/config/kube-yaml.ts";
import { DOCUMENT_KIND_NAMES, KIND_NAMES } from "../../src/core/policy-set/policy-kinds.ts";
import type { CompiledPolicy } from "../../src/core/policy-kind.ts";

const FILE = "test/fuzz/policy-text.test.ts";
const ORIGIN = "fuzz/policies.yaml";
const profiles = profileSources(await shippedProfiles());

function parse(text: string): ParsedPolicies {
  return parsePolicyText(text, ORIGIN, { profiles });
}

// ---------------------------------------------------------------------------------------------
// The policies the project ships (examples/, deploy/, policies/) and the docs' policy examples: the valid space

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const SHIPPED_FILES = [
  "examples/exceptions/policies.yaml",
  "deploy/default-policies/pinned-versions.yaml",
  ...["policies/default", "policies/examples", "policies/profiles"].flatMap((dir) =>
    readdirSync(join(REPO_ROOT, dir))
      .filter((f) => f.endsWith(".yaml"))
      .sort()
      .map((f) => `${dir}/${f}`),
  ),
];

function policyDocuments(text: string): Array<Record<string, Json>> {
  return readKubeYaml(text)
    .documents.map((d) => d.value)
    .filter(
      (v): v is Record<string, Json> =>
        typeof v === "object" && v !== null && !Array.isArray(v) && DOCUMENT_KIND_NAMES.includes(String((v as { kind?: unknown }).kind)),
    );
}

const shipped = SHIPPED_FILES.flatMap((f) => policyDocuments(readFileSync(join(REPO_ROOT, f), "utf8")));
// The docs' complete examples (not excerpts, not the ones shown refused) that load on their own: more of each kind.
const fromDocs = docPages()
  .flatMap((page) => fences(page))
  .filter((f) => f.lang === "yaml" && f.marker === undefined)
  .flatMap((f) => policyDocuments(f.body))
  .filter((doc) => {
    const r = parse(JSON.stringify(doc));
    return r.errors.length === 0 && KIND_NAMES.some((k) => r.policies[k].length === 1);
  });
const SEEDS: ReadonlyArray<Record<string, Json>> = [...shipped, ...fromDocs];

/** Every field spec may hold in any kind (their JSON Schemas), so that a generated field name is surely unknown. */
const KNOWN_SPEC_FIELDS = new Set(
  readdirSync(join(REPO_ROOT, "src/core"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".schema.json"))
    .flatMap((f) =>
      Object.keys(
        (JSON.parse(readFileSync(join(REPO_ROOT, "src/core", f), "utf8")) as { properties?: { spec?: { properties?: object } } }).properties?.spec
          ?.properties ?? {},
      ),
    ),
);

// ---------------------------------------------------------------------------------------------
// What every answer must be

const policiesOf = (r: ParsedPolicies): CompiledPolicy[] => KIND_NAMES.flatMap((k) => r.policies[k] as readonly CompiledPolicy[]);

/**
 * The answer is well formed: every error has a message and a place (a line within the text, or a field path), each
 * renders, and every non-empty document of the text gave a policy or an error (none is silently dropped).
 */
function assertWellFormed(text: string, r: ParsedPolicies): void {
  assert.ok(Array.isArray(r.errors));
  for (const k of KIND_NAMES) assert.ok(Array.isArray(r.policies[k]), k);
  const lines = text.split("\n").length;
  for (const e of r.errors) {
    assert.equal(e.origin, ORIGIN);
    assert.equal(typeof e.message, "string");
    assert.ok(e.message.trim().length > 0, "an error without a message");
    const hasLine = e.line !== undefined && Number.isInteger(e.line) && e.line >= 1 && e.line <= lines;
    const hasPath = typeof e.path === "string" && e.path.length > 0;
    assert.ok(hasLine || hasPath, `an error without a place: ${JSON.stringify(e)} (text of ${lines} lines)`);
    if (e.line !== undefined) assert.ok(hasLine, `line ${e.line} outside the text's ${lines} lines: ${e.message}`);
    if (e.document !== undefined) assert.ok(Number.isInteger(e.document) && e.document >= 1, `document ${e.document}`);
    assert.ok(renderPolicyError(e).includes(e.message));
  }
  if (r.errors.length > 0) assert.equal(new PolicyLoadError(r.errors).code, "invalid-policy");
  const answered = new Set<number | undefined>([...r.errors.map((e) => e.document), ...policiesOf(r).map((p) => p.source?.document)]);
  for (const p of policiesOf(r)) assert.equal(p.source?.origin, ORIGIN);
  if (r.errors.some((e) => e.document === undefined)) return; // an error without a document may stand for any
  for (const { document } of readKubeYaml(text).documents) assert.ok(answered.has(document), `document ${document} gave neither a policy nor an error`);
}

/** Parses, checking that nothing escapes untyped, that the answer is well formed and that no prototype was polluted. */
function parseChecked(text: string): ParsedPolicies {
  const r = parse(text);
  assertWellFormed(text, r);
  assert.equal(({} as Record<string, unknown>).polluted, undefined, "Object.prototype polluted");
  return r;
}

// ---------------------------------------------------------------------------------------------
// Arbitrary text

const YAML_TOKENS = [
  "\n",
  "\n",
  "\n",
  "  ",
  "    ",
  "\t",
  "- ",
  ": ",
  ":",
  "? ",
  ",",
  "[",
  "]",
  "{",
  "}",
  "&a ",
  "&b ",
  "*a",
  "*b",
  "<<: *a\n",
  "<<: [*a, *b]\n",
  "---\n",
  "--- ",
  "...\n",
  "#",
  "# comment\n",
  "%YAML 1.1\n",
  "%TAG ! tag:x,2000:\n",
  "!!int ",
  "!!str ",
  "!!binary ",
  "!!float ",
  "!!map ",
  "!x ",
  "|\n",
  ">-\n",
  "|+2\n",
  "'",
  '"',
  "\\",
  "\\u00e9",
  "~",
  "null",
  "yes",
  "no",
  "on",
  "0x1F",
  "0o17",
  "017",
  "1e3",
  ".inf",
  "-.inf",
  ".nan",
  "1_000",
  "2001-12-14",
  "apiVersion: imprimatur.dev/v1alpha1\n",
  "apiVersion: policy/v1alpha1\n",
  "kind: ImagePolicy\n",
  "kind: PodRestriction\n",
  "kind: TrustRoot\n",
  "kind: PolicyException\n",
  "kind: NamespacedImagePolicy\n",
  "metadata:\n  name: x\n",
  "spec:\n",
  "  rules:\n",
  "    - action: allow\n",
  "      images: ['*']\n",
  "  default: deny\n",
  "__proto__: {polluted: 1}\n",
  "constructor: {prototype: {polluted: 1}}\n",
  "\u00a0",
  "\u2028",
  "\ufeff",
  "\u0000",
  "\r\n",
  "\r",
];
const yamlNoise = fc
  .array(fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...YAML_TOKENS) }, { weight: 1, arbitrary: fc.string({ maxLength: 6 }) }), { maxLength: 120 })
  .map((t) => t.join(""));
const randomBytes = fc.uint8Array({ maxLength: 2000 }).map((b) => Buffer.from(b).toString("utf8"));
/** `[[[…]]]` and friends, up to 10 000 deep, balanced or not, alone or as a policy's field. */
const deepNesting = fc
  .tuple(
    fc.constantFrom(10, 100, 1000, 5000, 10_000),
    fc.constantFrom(["[", "]"], ["{a: ", "}"], ["[{a: ", "}]"], ["{", "}"]),
    fc.boolean(),
    fc.constantFrom("", "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: x}\nspec:\n  rules: "),
  )
  .map(([depth, [open, close], balanced, prefix]) => prefix + open.repeat(depth) + (balanced ? close.repeat(depth) : close.repeat(depth >> 1)));
/** Block-style nesting (each level indented one more), up to 1 000 deep. */
const deepBlocks = fc
  .tuple(fc.integer({ min: 1, max: 1000 }), fc.boolean())
  .map(([depth, lists]) => Array.from({ length: depth }, (_, i) => " ".repeat(i) + (lists ? "- " : "k:")).join("\n") + (lists ? "x" : " v"));
/** Large documents: a huge scalar, a mapping with many keys, a long list of policies. */
const huge = fc.oneof(
  fc
    .tuple(fc.string({ minLength: 1, maxLength: 4 }), fc.integer({ min: 10_000, max: 1_000_000 }))
    .map(([s, n]) => `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata:\n  name: ${JSON.stringify(s.repeat(n / s.length))}\n`),
  fc.integer({ min: 1000, max: 20_000 }).map((n) => Array.from({ length: n }, (_, i) => `k${i}: v${i}`).join("\n")),
  fc
    .integer({ min: 10, max: 300 })
    .map((n) =>
      Array.from(
        { length: n },
        (_, i) => `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: p${i}}\nspec: {rules: [{action: allow, images: ["*"]}]}`,
      ).join("\n---\n"),
    ),
);
const seedText = fc
  .constantFrom(...SEEDS)
  .chain((doc) => fc.constantFrom(JSON.stringify(doc), JSON.stringify(doc, null, 2), stringify(doc, { version: "1.1" })));
/** A valid text cut short, or with noise spliced in. */
const damagedSeed = fc
  .tuple(seedText, fc.nat(), fc.nat(), fc.oneof(fc.constant(""), fc.constantFrom(...YAML_TOKENS), fc.string({ maxLength: 20 })))
  .map(([text, a, b, splice]) => {
    const i = a % (text.length + 1);
    const j = Math.min(text.length, i + (b % 40));
    return text.slice(0, i) + splice + text.slice(j);
  });
const stream = fc
  .array(fc.oneof(seedText, damagedSeed, yamlNoise, fc.json()), { minLength: 1, maxLength: 6 })
  .chain((parts) => fc.constantFrom("\n---\n", "\n", "\n...\n---\n", "---\n").map((sep) => parts.join(sep)));
const arbitraryText = fc.oneof(
  { weight: 3, arbitrary: yamlNoise },
  { weight: 2, arbitrary: randomBytes },
  { weight: 3, arbitrary: damagedSeed },
  { weight: 2, arbitrary: stream },
  { weight: 1, arbitrary: deepNesting },
  { weight: 1, arbitrary: deepBlocks },
  { weight: 1, arbitrary: huge },
  { weight: 1, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 300 }) },
);

test("shipped policies load without errors (the valid space the mutations start from)", () => {
  assert.ok(shipped.length >= 8, `${shipped.length} shipped policy documents`);
  for (const kind of ["ImagePolicy", "PodRestriction", "PolicyException"])
    assert.ok(
      SEEDS.some((d) => d.kind === kind),
      kind,
    );
  for (const doc of SEEDS) {
    for (const text of [JSON.stringify(doc), stringify(doc, { version: "1.1" })]) {
      const r = parseChecked(text);
      assert.deepEqual(r.errors, [], `${String(doc.kind)} ${JSON.stringify((doc.metadata as { name?: unknown } | undefined)?.name)}`);
      assert.equal(policiesOf(r).length, 1);
    }
  }
});

test("a JSON stream's values are located on their own lines", () => {
  // Regression: in a JSON stream (text that starts with "{"), a value that is not an object or list counted the
  // line end after it twice, so every later value's errors named a line below it (beyond the text at the end).
  const r = parseChecked(
    '{"apiVersion": "imprimatur.dev/v1alpha1", "kind": "ImagePolicy", "metadata": {"name": "a"}, "spec": {"rules": [{"action": "allow", "images": ["*"]}]}}\n"word"\n{"kind": "Nope"}\n7\n',
  );
  assert.equal(r.policies.ImagePolicy.length, 1);
  assert.deepEqual(
    r.errors.map((e) => [e.document, e.line]),
    [
      [2, 2],
      [3, 3],
      [4, 4],
    ],
  );
});

test("any text gets policies and located errors, never an exception, and no document is dropped", async () => {
  const seen = { policies: 0, errors: 0, empty: 0 };
  await checkProperty(
    fc.property(arbitraryText, (text) => {
      const r = parseChecked(text);
      if (policiesOf(r).length > 0) seen.policies++;
      if (r.errors.length > 0) seen.errors++;
      if (policiesOf(r).length === 0 && r.errors.length === 0) seen.empty++;
    }),
    { file: FILE },
  );
  if (fuzzRuns() >= 50) assert.ok(seen.policies > 0 && seen.errors > 0, JSON.stringify(seen));
});

// ---------------------------------------------------------------------------------------------
// Mutations of valid policies

type Path = Array<string | number>;

function pathsOf(value: Json, at: Path = [], out: Path[] = []): Path[] {
  out.push(at);
  if (Array.isArray(value)) value.forEach((v, i) => pathsOf(v, [...at, i], out));
  else if (value !== null && typeof value === "object") for (const [k, v] of Object.entries(value)) pathsOf(v, [...at, k], out);
  return out;
}

function get(root: Json, path: Path): Json | undefined {
  let node: Json | undefined = root;
  for (const segment of path) node = node !== null && typeof node === "object" ? (node as Record<string | number, Json>)[segment] : undefined;
  return node;
}

/** Sets an own property, also for "__proto__" (an assignment would change the prototype instead). */
function put(holder: Json, key: string | number, value: Json): void {
  if (Array.isArray(holder) && typeof key === "number") holder[key] = value;
  else if (holder !== null && typeof holder === "object") Object.defineProperty(holder, key, { value, enumerable: true, writable: true, configurable: true });
}

type Mutation =
  | { op: "delete"; at: number }
  | { op: "replace"; at: number; value: Json }
  | { op: "add"; at: number; key: string; value: Json }
  | { op: "header"; apiVersion: Json | undefined; kind: Json | undefined };

const awkwardValue: fc.Arbitrary<Json> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue() as fc.Arbitrary<Json> },
  {
    weight: 2,
    arbitrary: fc.constantFrom<Json>(null, 0, -1, 1.5, "", " ", "*", "[", true, false, [], {}, [null], { "": null }, "yes", "0x10", "${x}", "{{ x }}"),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 200_000 }).map((n) => "x".repeat(n)) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 10, max: 300 }).map((n) => {
      let v: Json = "x";
      for (let i = 0; i < n; i++) v = [v];
      return v;
    }),
  },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
);
const fieldName = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom("__proto__", "constructor", "prototype", "toString", "hasOwnProperty", "", "a.b", "a[0]", "$ref", "<<", "é", "🙂"),
);
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant("delete" as const), at: fc.nat() }),
  fc.record({ op: fc.constant("replace" as const), at: fc.nat(), value: awkwardValue }),
  fc.record({ op: fc.constant("add" as const), at: fc.nat(), key: fieldName, value: awkwardValue }),
  fc.record({
    op: fc.constant("header" as const),
    apiVersion: fc.option(fc.oneof(fc.constantFrom<Json>("imprimatur.dev/v1alpha1", "policy/v1alpha1", "imprimatur.dev/v1", "v1", ""), awkwardValue), {
      nil: undefined,
    }),
    kind: fc.option(fc.oneof(fc.constantFrom<Json>(...DOCUMENT_KIND_NAMES, "imagepolicy", "Pod", ""), awkwardValue), { nil: undefined }),
  }),
);

function mutate(doc: Json, m: Mutation): Json {
  if (m.op === "header") {
    if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return doc;
    if (m.apiVersion === undefined) delete doc.apiVersion;
    else put(doc, "apiVersion", m.apiVersion);
    if (m.kind === undefined) delete doc.kind;
    else put(doc, "kind", m.kind);
    return doc;
  }
  const paths = pathsOf(doc);
  const path = paths[m.at % paths.length]!;
  if (m.op === "replace") {
    if (path.length === 0) return m.value;
    put(get(doc, path.slice(0, -1))!, path.at(-1)!, m.value);
    return doc;
  }
  const target = get(doc, path);
  if (m.op === "add") {
    if (target !== null && typeof target === "object" && !Array.isArray(target)) put(target, m.key, m.value);
    else if (Array.isArray(target)) target.push(m.value);
    return doc;
  }
  if (path.length === 0) return null;
  const holder = get(doc, path.slice(0, -1))!;
  if (Array.isArray(holder)) holder.splice(path.at(-1) as number, 1);
  else if (holder !== null && typeof holder === "object") delete holder[path.at(-1) as string];
  return doc;
}

const serialization = fc.constantFrom("json", "json-indented", "yaml", "yaml-flow");
function serialize(doc: Json, how: string): string {
  if (how === "json") return JSON.stringify(doc);
  if (how === "json-indented") return JSON.stringify(doc, null, 2);
  // Version 1.1 quotes what YAML 1.1 would read otherwise (yes, on, 0644), as the loader reads 1.1.
  const yaml = stringify(doc, { version: "1.1", ...(how === "yaml-flow" ? { collectionStyle: "flow" as const } : {}), lineWidth: 0 });
  // A text whose first character is "{" is a JSON stream (as kubectl reads it), and flow YAML is not JSON (its
  // strings may be single-quoted): a comment first keeps it YAML.
  return how === "yaml-flow" ? `# flow style\n${yaml}` : yaml;
}

const mutatedSeed = fc.tuple(fc.constantFrom(...SEEDS), fc.array(mutation, { minLength: 0, maxLength: 3 }), serialization);

test("mutated shipped policies get policies or located errors, never an exception", async () => {
  const seen = { accepted: 0, refused: 0 };
  await checkProperty(
    fc.property(fc.array(mutatedSeed, { minLength: 1, maxLength: 3 }), (docs) => {
      const texts = docs.map(([seed, mutations, how]) =>
        serialize(
          mutations.reduce<Json>((d, m) => mutate(d, m), structuredClone(seed)),
          how,
        ),
      );
      // As one document per text, and as one stream (YAML documents separated by ---).
      const yamlStream = docs.every(([, , how]) => how.startsWith("yaml"));
      for (const text of yamlStream ? [...texts, texts.join("---\n")] : texts) {
        const r = parseChecked(text);
        if (r.errors.length === 0) seen.accepted++;
        else seen.refused++;
      }
    }),
    { file: FILE },
  );
  // Not vacuous: some mutations keep a policy valid (deleting an optional field, none at all), most do not.
  if (fuzzRuns() >= 50) assert.ok(seen.accepted > 0 && seen.refused > 0, JSON.stringify(seen));
});

const withSpec = SEEDS.filter((d) => d.spec !== null && typeof d.spec === "object" && !Array.isArray(d.spec));
const unknownSpecField = fc.oneof(
  fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_-]{0,24}$/),
  fc.string({ minLength: 1, maxLength: 12 }),
  fc.constantFrom("__proto__", "constructor", "toString", "rule", "Rules", "defualt", "é", "a b"),
);

test("an unknown field at the top of spec is an error that names it", async () => {
  assert.ok(withSpec.length >= 8);
  await checkProperty(
    fc.property(
      fc.constantFrom(...withSpec),
      unknownSpecField.filter((name) => !KNOWN_SPEC_FIELDS.has(name)),
      awkwardValue,
      serialization,
      (seed, name, value, how) => {
        const doc = structuredClone(seed);
        put(doc.spec!, name, value);
        const r = parseChecked(serialize(doc, how));
        assert.equal(policiesOf(r).length, 0, "a policy with an unknown field was compiled");
        const named = r.errors.find((e) => e.path === `spec.${name}` && e.message.includes(JSON.stringify(name)));
        assert.ok(named, `no error names spec.${name}: ${JSON.stringify(r.errors)}`);
      },
    ),
    { file: FILE },
  );
});

// ---------------------------------------------------------------------------------------------
// Alias bombs

/** Billion laughs: each level an anchored list of `fanout` aliases to the level below, `levels` deep. */
function aliasBomb(levels: number, fanout: number, style: "flow" | "block" | "merge", where: "top" | "policy"): string {
  const lines: string[] = [];
  if (style === "merge") {
    lines.push(`l0: &l0 {k0: lol}`);
    for (let i = 1; i < levels; i++)
      lines.push(
        `l${i}: &l${i} {${Array.from({ length: fanout }, (_, j) => `k${j}: *l${i - 1}`).join(", ")}, <<: [${Array.from({ length: Math.min(fanout, 4) }, () => `*l${i - 1}`).join(", ")}]}`,
      );
  } else {
    lines.push(`l0: &l0 [${Array.from({ length: fanout }, () => '"lol"').join(", ")}]`);
    for (let i = 1; i < levels; i++) {
      if (style === "flow") lines.push(`l${i}: &l${i} [${Array.from({ length: fanout }, () => `*l${i - 1}`).join(", ")}]`);
      else lines.push(`l${i}: &l${i}\n${Array.from({ length: fanout }, () => `  - *l${i - 1}`).join("\n")}`);
    }
  }
  if (where === "top") return lines.join("\n") + "\n";
  return [
    "apiVersion: imprimatur.dev/v1alpha1",
    "kind: ImagePolicy",
    "metadata:",
    "  name: bomb",
    "  annotations:",
    ...lines.map((l) => l.replace(/^/gm, "    ")),
    "spec:",
    `  rules: [{action: allow, images: *l${levels - 1}}]`,
  ].join("\n");
}

test("alias bombs are refused or bounded, in time", async () => {
  const PER_INPUT_MS = 20_000; // generous: two busy cores; the bombs refused here take milliseconds
  await checkProperty(
    fc.property(
      fc.integer({ min: 2, max: 12 }),
      fc.integer({ min: 2, max: 12 }),
      fc.constantFrom("flow" as const, "block" as const, "merge" as const),
      fc.constantFrom("top" as const, "policy" as const),
      (levels, fanout, style, where) => {
        const text = aliasBomb(levels, fanout, style, where);
        const started = performance.now();
        const r = parseChecked(text);
        const elapsed = performance.now() - started;
        assert.ok(elapsed < PER_INPUT_MS, `${levels} levels of ${fanout}: ${Math.round(elapsed)} ms`);
        // What expands to millions of nodes is refused as a bomb, not expanded.
        if (style !== "merge" && fanout ** levels > 10_000_000) {
          assert.ok(
            r.errors.some((e) => /alias/.test(e.message)),
            `${levels} levels of ${fanout} not refused: ${JSON.stringify(r.errors).slice(0, 500)}`,
          );
        }
      },
    ),
    { file: FILE, runs: Math.max(5, Math.ceil(fuzzRuns() / 10)) },
  );
  // The classic one: nine levels of ten, a billion "lol"s.
  const r = parseChecked(aliasBomb(10, 10, "flow", "top"));
  assert.ok(
    r.errors.some((e) => e.message.includes("excessive aliasing")),
    JSON.stringify(r.errors),
  );
});
