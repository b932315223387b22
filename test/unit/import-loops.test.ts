// The modules under src/ import each other without loops, type-only imports included: a loop means two files
// that cannot be read, tested or changed one without the other, and it is how layers (request and subject types
// at the bottom of the core, the policy kinds above them, the pipeline above the kinds) quietly erode.
// Imports are read with TypeScript's own pre-processor, not a regular expression.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Each file's relative imports (import, export … from, import()), type-only ones included. */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets = importedFiles
      .map((i) => i.fileName)
      .filter((name) => name.startsWith("."))
      .map((name) => resolve(dirname(file), name))
      .filter((target) => known.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Strongly connected components of more than one file, or of one file that imports itself (Tarjan). */
function importLoops(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const loops: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || graph.get(v)?.includes(v)) loops.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return loops;
}

test("no module under src/ takes part in an import loop, type-only imports included", () => {
  const loops = importLoops(importGraph(sourceFiles(SRC)));
  const described = loops.map((loop) => loop.map((f) => relative(SRC, f)).join(" ↔ "));
  assert.deepEqual(described, [], `import loops under src/:\n${described.join("\n")}`);
});

test("the loop finder finds loops through type-only imports and self-imports, and none in a layered graph", () => {
  // The detector itself must be able to fail: a loop made of type imports, as src/core had.
  const dir = resolve(SRC, "core");
  const a = join(dir, "a.ts");
  const b = join(dir, "b.ts");
  const c = join(dir, "c.ts");
  assert.deepEqual(
    importLoops(
      new Map([
        [a, [b]],
        [b, [c]],
        [c, [a]],
      ]),
    ),
    [[a, b, c]],
  );
  assert.deepEqual(importLoops(new Map([[a, [a]]])), [[a]]);
  assert.deepEqual(
    importLoops(
      new Map([
        [a, [b, c]],
        [b, [c]],
        [c, []],
      ]),
    ),
    [],
  );
  const { importedFiles } = ts.preProcessFile('import type { X } from "./b.ts";\nexport { y } from "./a.ts";\n', true, true);
  assert.deepEqual(
    importedFiles.map((i) => i.fileName),
    ["./b.ts", "./a.ts"],
    "type-only imports and re-exports are both read",
  );
});
