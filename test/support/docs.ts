// Reading the Markdown docs for the tests that keep them true: which pages there are, and their fenced blocks
// with the marker a page may put before one (`<!-- example: partial -->`, see test/unit/docs-examples.test.ts).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./cli-process.ts";

/** The user-facing pages, relative to the repository: README.md, examples/README.md and docs/*.md. */
export function docPages(): string[] {
  const docs = readdirSync(join(REPO_ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", "examples/README.md", ...docs];
}

export function readPage(page: string): string {
  return readFileSync(join(REPO_ROOT, page), "utf8");
}

export interface Fence {
  page: string;
  /** The 1-based line of the opening fence. */
  line: number;
  /** The 1-based line of the closing fence. */
  endLine: number;
  /** The info string's language ("yaml", "sh", "" for none). */
  lang: string;
  /** The lines inside the fence, with the fence's own indentation removed. */
  body: string;
  /** What `<!-- example: WHAT -->` on the last non-blank line before the fence says, if it is there. */
  marker: string | undefined;
  /** The lines between the previous fence (or the top of the page) and this one. */
  before: string;
}

const MARKER = /^\s*<!-- example: ([a-z-]+) -->\s*$/;

/** Every fenced block of `page`, in order, indented ones (inside list items) included. */
export function fences(page: string, text = readPage(page)): Fence[] {
  const lines = text.split("\n");
  const out: Fence[] = [];
  let previousEnd = 0;
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!;
    let end = i + 1;
    while (end < lines.length && !new RegExp(`^${indent}\`\`\`\\s*$`).test(lines[end]!)) end++;
    if (end === lines.length) throw new Error(`${page}:${i + 1}: a fence that is never closed`);
    let prev = i - 1;
    while (prev >= 0 && lines[prev]!.trim() === "") prev--;
    out.push({
      page,
      line: i + 1,
      endLine: end + 1,
      lang: open[2]!,
      body: lines
        .slice(i + 1, end)
        .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l.trimStart()))
        .join("\n"),
      marker: prev >= 0 ? MARKER.exec(lines[prev]!)?.[1] : undefined,
      before: lines.slice(previousEnd, i).join("\n"),
    });
    previousEnd = end + 1;
    i = end;
  }
  return out;
}

/** GitHub's anchor of a heading: lowercase, punctuation dropped, spaces as "-". */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}
