// The image's src/ compiled from TypeScript (src/image-build/compiled-source.ts): a small tree compiled, written out
// and run by node with type stripping off, so it runs as plain JavaScript: static and dynamic imports of `./x.ts`
// rewritten, a JSON import and a JSON file read next to the module; the same bytes every time, cached or not; this
// checkout's src compiles whole; and what stops a build: no typescript installed, another version than the
// lockfile's, a file that does not parse.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compiledSourceEntries, projectCompiler } from "../../../src/image-build/compiled-source.ts";
import { PROJECT_DIR } from "../../../src/image-build/build-image.ts";
import type { TarEntry } from "../../../src/image-build/reproducible-tar.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";

const compiler = projectCompiler(PROJECT_DIR);
const file = (path: string, text: string, mode = 0o644): TarEntry => ({ type: "file", path, mode, content: Buffer.from(text) });

const FIXTURE: TarEntry[] = [
  { type: "dir", path: "app/src", mode: 0o755 },
  file(
    "app/src/main.ts",
    `import { readFileSync } from "node:fs";
import { double, type Doubled } from "./lib/double.ts";
import pkg from "../package.json" with { type: "json" };

const doubled: Doubled = double(21);
const { later } = await import("./lib/later.ts");
const data = JSON.parse(readFileSync(new URL("./data/table.json", import.meta.url), "utf8")) as { rows: number };
process.stdout.write(JSON.stringify({ doubled, later: later(), version: pkg.version, rows: data.rows }));
`,
    0o755,
  ),
  { type: "dir", path: "app/src/lib", mode: 0o755 },
  file("app/src/lib/double.ts", `export type Doubled = number;\nexport function double(n: number): Doubled {\n  return n * 2;\n}\n`),
  file("app/src/lib/later.ts", `import { double } from "./double.ts";\nexport const later = (): string => \`later \${double(2)}\`;\n`),
  file("app/src/lib/ambient.d.ts", `declare const nothing: never;\n`),
  { type: "dir", path: "app/src/data", mode: 0o755 },
  file("app/src/data/table.json", `{ "rows": 3 }\n`),
  { type: "symlink", path: "app/src/data/same.json", target: "table.json" },
];

test("each .ts becomes a .js beside it (same mode), .d.ts files go, everything else stays, and node runs it without type stripping", () => {
  const out = compiledSourceEntries(FIXTURE, compiler);
  assert.deepEqual(
    out.map((e) => `${e.type} ${e.path}${e.type === "file" ? ` ${e.mode.toString(8)}` : ""}`),
    [
      "dir app/src",
      "file app/src/main.js 755",
      "dir app/src/lib",
      "file app/src/lib/double.js 644",
      "file app/src/lib/later.js 644",
      "dir app/src/data",
      "file app/src/data/table.json 644",
      "symlink app/src/data/same.json",
    ],
  );
  const main = (out[1] as { content: Buffer }).content.toString("utf8");
  assert.match(main, /from "\.\/lib\/double\.js"/);
  assert.match(main, /import\("\.\/lib\/later\.js"\)/);
  assert.match(main, /from "\.\.\/package\.json" with \{ type: "json" \}/);
  assert.doesNotMatch(main, /Doubled|\.ts"|sourceMappingURL/);

  const dir = mkdtempSync(join(tmpdir(), "imprimatur-compiled-"));
  try {
    mkdirSync(join(dir, "app"));
    writeFileSync(join(dir, "app", "package.json"), JSON.stringify({ type: "module", version: "1.2.3" }));
    for (const entry of out) {
      const path = join(dir, entry.path);
      if (entry.type === "dir") mkdirSync(path, { recursive: true });
      else if (entry.type === "file") writeFileSync(path, entry.content, { mode: entry.mode });
      else symlinkSync(entry.target, path);
    }
    assert.equal(statSync(join(dir, "app/src/main.js")).mode & 0o777, 0o755);
    const run = spawnSync(process.execPath, ["--no-experimental-strip-types", join(dir, "app/src/main.js")], { encoding: "utf8" });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), { doubled: 42, later: "later 4", version: "1.2.3", rows: 3 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the same source gives the same bytes, compiled afresh or kept in the cache, one file per source", () => {
  const expected = compiledSourceEntries(FIXTURE, compiler);
  assert.deepEqual(compiledSourceEntries(FIXTURE, projectCompiler(PROJECT_DIR)), expected);
  const cache = mkdtempSync(join(tmpdir(), "imprimatur-compile-cache-"));
  try {
    assert.deepEqual(compiledSourceEntries(FIXTURE, projectCompiler(PROJECT_DIR, cache)), expected);
    assert.equal(readdirSync(cache).filter((name) => name.endsWith(".js")).length, 3);
    assert.deepEqual(
      readdirSync(cache).filter((name) => !name.endsWith(".js")),
      [],
      "no partial files left",
    );
    assert.deepEqual(compiledSourceEntries(FIXTURE, projectCompiler(PROJECT_DIR, cache)), expected);
    // A changed source is another key: compiled again, not taken from the cache.
    const changed = FIXTURE.map((e) => (e.path === "app/src/lib/double.ts" ? file(e.path, "export const double = (n: number): number => n + n;\n") : e));
    const out = compiledSourceEntries(changed, projectCompiler(PROJECT_DIR, cache));
    assert.equal(
      (out.find((e) => e.path === "app/src/lib/double.js") as { content: Buffer }).content.toString("utf8"),
      "export const double = (n) => n + n;\n",
    );
    assert.equal(readdirSync(cache).length, 4);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});

test("this checkout's src compiles whole, with no relative .ts specifier left", () => {
  const src = join(PROJECT_DIR, "src");
  const entries: TarEntry[] = readdirSync(src, { recursive: true, encoding: "utf8" })
    .sort()
    .filter((name) => statSync(join(src, name)).isFile())
    .map((name) => file(`app/src/${name}`, readFileSync(join(src, name), "utf8")));
  const out = compiledSourceEntries(entries, compiler);
  assert.ok(out.some((e) => e.path === "app/src/cli/main.js"));
  assert.ok(out.some((e) => e.path === "app/src/kube/pod-fields.generated.json"));
  for (const entry of out) {
    assert.ok(!entry.path.endsWith(".ts"), entry.path);
    if (entry.type === "file" && entry.path.endsWith(".js")) {
      assert.doesNotMatch(entry.content.toString("utf8"), /(?:from |import\()["']\.{1,2}\/[^"']*\.ts["']/, entry.path);
    }
  }
});

test("a build without typescript installed (npm ci --omit=dev) says to run npm ci", () => {
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-no-typescript-"));
  try {
    assert.throws(
      () => projectCompiler(dir),
      (e: unknown) => hasErrorCode(e, "node-modules") && /node_modules\/typescript not found: run npm ci/.test((e as Error).message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a typescript other than the lockfile's says to run npm ci", () => {
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-other-typescript-"));
  try {
    mkdirSync(join(dir, "node_modules"));
    symlinkSync(join(PROJECT_DIR, "node_modules", "typescript"), join(dir, "node_modules", "typescript"));
    writeFileSync(join(dir, "package-lock.json"), JSON.stringify({ lockfileVersion: 3, packages: { "node_modules/typescript": { version: "0.0.1" } } }));
    assert.throws(
      () => projectCompiler(dir),
      (e: unknown) =>
        hasErrorCode(e, "node-modules") && /typescript is \S+ in node_modules but 0\.0\.1 in package-lock\.json: run npm ci/.test((e as Error).message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("type errors do not stop the build; a file that does not parse, .tsx and a link to a .ts do", () => {
  const typeError = compiledSourceEntries([file("app/src/a.ts", `export const n: number = "not a number";\n`)], compiler);
  assert.equal((typeError[0] as { content: Buffer }).content.toString("utf8"), `export const n = "not a number";\n`);
  for (const [entries, message] of [
    [[file("app/src/broken.ts", "export const = ;\n")], /app\/src\/broken\.ts:1: /],
    [[file("app/src/view.tsx", "export {};\n")], /only \.ts files/],
    [[{ type: "symlink", path: "app/src/alias.js", target: "real.ts" }], /symlink to real\.ts/],
  ] as const) {
    assert.throws(
      () => compiledSourceEntries(entries, compiler),
      (e: unknown) => hasErrorCode(e, "input") && message.test((e as Error).message),
    );
  }
});
