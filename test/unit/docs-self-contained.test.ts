// The docs stand on their own: README.md, examples/README.md and docs/*.md cite designs by their subject, never by a path to a folder
// outside the repository, and every file they link to is in the repository.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { test } from "node:test";
import { REPO_ROOT } from "../support/cli-process.ts";
import { docPages } from "../support/docs.ts";

const root = resolve(REPO_ROOT);
const pages = docPages();

const inside = (path: string) => path === root || path.startsWith(root + sep);

test("no page cites a design by a path outside the repository", () => {
  for (const page of pages) {
    const text = readFileSync(join(root, page), "utf8");
    text.split("\n").forEach((line, i) => {
      assert.doesNotMatch(line, /\.\.\/shared\b|\bshared\/(seeds|recipes|design\.md)|\bseeds?\/\d{3}_|\bseed \d{3}\b/, `${page}:${i + 1}: ${line}`);
      // A relative path in code (`../x`) must stay inside the repository too.
      for (const m of line.matchAll(/`(\.\.\/[^`\s]*)`/g)) {
        assert.ok(inside(resolve(root, dirname(page), m[1]!)), `${page}:${i + 1}: ${m[1]} leaves the repository`);
      }
    });
  }
});

test("every relative link of a page names a file of the repository", () => {
  for (const page of pages) {
    const text = readFileSync(join(root, page), "utf8");
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!.split("#")[0]!;
      if (target === "" || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // an anchor, or a URL
      const path = resolve(root, dirname(page), decodeURIComponent(target));
      assert.ok(inside(path), `${page}: ${m[1]} leaves the repository`);
      assert.ok(existsSync(path), `${page}: ${m[1]} (${relative(root, path)}) does not exist`);
    }
  }
});
