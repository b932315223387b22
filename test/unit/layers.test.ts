// The layers of src/, as docs/CONTRIBUTING.md's "Layers" table writes them: the folders in rank order (core's
// sub-folders among them), each with the folders it may import. A folder may import only folders ranked below it,
// so the table itself cannot hold a loop; this test reads the table, checks that, and fails on any import under
// src/ (type-only ones included) that runs against it. There is no exception list: a misplaced type moves.
// Imports are read with TypeScript's own pre-processor, not a regular expression.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SRC = join(ROOT, "src");
const CONTRIBUTING = join(ROOT, "docs/CONTRIBUTING.md");

/** `core/*` in a "may import" list: core and every one of its sub-folders. `*`: every folder ranked below. */
const ALL_OF_CORE = "core/*";
const EVERYTHING_BELOW = "*";

interface Layer {
  folder: string;
  mayImport: readonly string[];
}

/** The rows of the table under "## Layers": | rank | `folder` | `a`, `b` | what it holds |. */
export function layersOf(markdown: string): Layer[] {
  const section = markdown.split(/^## /m).find((s) => s.startsWith("Layers"));
  assert.ok(section, 'docs/CONTRIBUTING.md has a "## Layers" section');
  const rows = section
    .split("\n")
    .filter((line) => /^\|\s*\d+\s*\|/.test(line))
    .map((line) => line.split("|").map((cell) => cell.trim()));
  return rows.map((cells) => ({
    folder: (cells[2] ?? "").replace(/`/g, ""),
    mayImport: (cells[3] ?? "")
      .split(",")
      .map((s) => s.replace(/`/g, "").trim())
      .filter((s) => s !== "" && s !== "—"),
  }));
}

/** The unit a file belongs to: its top folder under src/, or core's sub-folder ("core" for core's own files). */
export function unitOf(file: string): string {
  const parts = relative(SRC, file).split(sep);
  if (parts[0] === "core" && parts.length > 2) return `core/${parts[1]}`;
  return parts.length > 1 ? (parts[0] ?? "") : ".";
}

/** What `layers` lets `from` import, with `core/*` and `*` spelled out. */
function allowedImports(layers: readonly Layer[]): Map<string, Set<string>> {
  const allowed = new Map<string, Set<string>>();
  layers.forEach((layer, rank) => {
    const below = layers.slice(0, rank).map((l) => l.folder);
    const names = layer.mayImport.flatMap((name) =>
      name === EVERYTHING_BELOW ? below : name === ALL_OF_CORE ? below.filter((f) => f === "core" || f.startsWith("core/")) : [name],
    );
    allowed.set(layer.folder, new Set(names));
  });
  return allowed;
}

/** Problems of the table itself: unknown names, a folder that may import one ranked at or above it, repeats. */
export function tableProblems(layers: readonly Layer[]): string[] {
  const problems: string[] = [];
  const rankOf = new Map<string, number>();
  layers.forEach((l, rank) => {
    if (rankOf.has(l.folder)) problems.push(`${l.folder} is listed twice`);
    rankOf.set(l.folder, rank);
  });
  layers.forEach((l, rank) => {
    for (const name of l.mayImport) {
      if (name === EVERYTHING_BELOW) continue;
      if (name === ALL_OF_CORE) {
        const core = layers.filter((x) => x.folder === "core" || x.folder.startsWith("core/"));
        for (const c of core)
          if ((rankOf.get(c.folder) ?? Infinity) >= rank) problems.push(`${l.folder} may import core/*, but ${c.folder} is not ranked below it`);
        continue;
      }
      const at = rankOf.get(name);
      if (at === undefined) problems.push(`${l.folder} may import ${name}, which is not in the table`);
      else if (at >= rank) problems.push(`${l.folder} may import ${name}, which is not ranked below it`);
    }
  });
  return problems;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Every relative import between units under src/: "from → to (file → file)". */
function crossUnitImports(files: readonly string[]): Array<{ from: string; to: string; where: string }> {
  const known = new Set(files);
  return files.flatMap((file) =>
    ts
      .preProcessFile(readFileSync(file, "utf8"), true, true)
      .importedFiles.map((i) => i.fileName)
      .filter((name) => name.startsWith("."))
      .map((name) => resolve(dirname(file), name))
      .filter((target) => known.has(target) && unitOf(target) !== unitOf(file))
      .map((target) => ({ from: unitOf(file), to: unitOf(target), where: `${relative(SRC, file)} → ${relative(SRC, target)}` })),
  );
}

/** The imports that run against the table, and the units the table does not list. */
export function layerViolations(layers: readonly Layer[], imports: ReturnType<typeof crossUnitImports>): string[] {
  const allowed = allowedImports(layers);
  const out: string[] = [];
  for (const i of imports) {
    const may = allowed.get(i.from);
    if (!may) out.push(`${i.from} is not in the table (${i.where})`);
    else if (!allowed.has(i.to)) out.push(`${i.to} is not in the table (${i.where})`);
    else if (!may.has(i.to)) out.push(`${i.from} may not import ${i.to}: ${i.where}`);
  }
  return [...new Set(out)];
}

const layers = layersOf(readFileSync(CONTRIBUTING, "utf8"));

test("the layers table is well formed: every folder once, each importing only folders ranked below it", () => {
  assert.ok(layers.length > 20, "the table lists the folders");
  assert.deepEqual(tableProblems(layers), []);
});

test("every folder under src/ (and each of core's sub-folders) has its row in the layers table, and every row a folder", () => {
  const units = new Set(sourceFiles(SRC).map(unitOf));
  assert.deepEqual([...units].filter((u) => !layers.some((l) => l.folder === u)).sort(), [], "folders the table does not list");
  assert.deepEqual(
    layers.map((l) => l.folder).filter((f) => !units.has(f)),
    [],
    "rows for folders that do not exist",
  );
});

test("no import under src/ runs against the layers, type-only imports included", () => {
  const violations = layerViolations(layers, crossUnitImports(sourceFiles(SRC)));
  assert.deepEqual(violations, [], `imports against docs/CONTRIBUTING.md's layers:\n${violations.join("\n")}`);
});

test("the layer checks can fail: an upward import, a loop in the table, an unknown folder, core/* before core", () => {
  const table: Layer[] = [
    { folder: "errors", mayImport: [] },
    { folder: "core", mayImport: ["errors"] },
    { folder: "core/image-policy", mayImport: ["core"] },
    { folder: "engine", mayImport: ["core/*", "errors"] },
    { folder: "cli", mayImport: ["*"] },
  ];
  assert.deepEqual(tableProblems(table), []);
  const at = (from: string, to: string) => ({ from, to, where: `${from}/a.ts → ${to}/b.ts` });
  assert.deepEqual(layerViolations(table, [at("engine", "core/image-policy"), at("cli", "engine"), at("core/image-policy", "core")]), []);
  assert.deepEqual(layerViolations(table, [at("core", "core/image-policy")]), ["core may not import core/image-policy: core/a.ts → core/image-policy/b.ts"]);
  assert.deepEqual(layerViolations(table, [at("engine", "cli")]), ["engine may not import cli: engine/a.ts → cli/b.ts"]);
  assert.deepEqual(layerViolations(table, [at("tls", "errors")]), ["tls is not in the table (tls/a.ts → errors/b.ts)"]);
  assert.deepEqual(
    tableProblems([
      { folder: "a", mayImport: ["b"] },
      { folder: "b", mayImport: ["a"] },
    ]),
    ["a may import b, which is not ranked below it"],
  );
  assert.deepEqual(
    tableProblems([
      { folder: "engine", mayImport: ["core/*"] },
      { folder: "core", mayImport: [] },
    ]),
    ["engine may import core/*, but core is not ranked below it"],
  );
  assert.deepEqual(tableProblems([{ folder: "a", mayImport: ["nowhere"] }]), ["a may import nowhere, which is not in the table"]);
  assert.equal(unitOf(join(SRC, "core/image-policy/image-policy.ts")), "core/image-policy");
  assert.equal(unitOf(join(SRC, "core/decision.ts")), "core");
  assert.equal(unitOf(join(SRC, "core/pod-restriction/restrictions/string-restriction.ts")), "core/pod-restriction");
  assert.equal(unitOf(join(SRC, "server/app.ts")), "server");
});
