// YAML read with positions, so that a problem found in the parsed value can name the line it stands on.
// Shared by the configuration loaders; policy files (src/policy/load-policies.ts) find lines the same way.
import { isMap, isSeq, LineCounter, parseAllDocuments, type Document, type Node as YamlNode } from "yaml";

/** A field path as segments: ["registries", 0, "mirrors"]. */
export type FieldPath = ReadonlyArray<string | number>;

/** One document of a YAML stream: its value, and the line of any field path in it. */
export interface LocatedDocument {
  value: unknown;
  /** The line of the deepest node of `path` that exists (the document's first line at worst). */
  lineOf(path: FieldPath): number | undefined;
}

export interface LocatedYaml {
  /** Documents without errors, in order; empty documents ("---" alone) are left out. */
  documents: LocatedDocument[];
  /** YAML syntax errors (and alias bombs), with the 1-based document they are in and their line. */
  errors: Array<{ document: number; line: number | undefined; message: string }>;
}

/** Parses a YAML stream (one or more documents); never throws. Duplicate keys are errors. */
export function parseYamlWithLines(text: string): LocatedYaml {
  const lineCounter = new LineCounter();
  const lineAt = (offset: number | undefined): number | undefined => (offset === undefined ? undefined : lineCounter.linePos(offset).line);
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const result: LocatedYaml = { documents: [], errors: [] };
  if ("empty" in docs) {
    // No document at all (an empty file, comments only); a stray directive is still an error.
    for (const err of docs.errors) result.errors.push({ document: 1, line: lineAt(err.pos[0]), message: firstLine(err.message) });
    return result;
  }
  docs.forEach((doc, i) => {
    const document = i + 1;
    if (doc.errors.length > 0) {
      for (const err of doc.errors) result.errors.push({ document, line: lineAt(err.pos[0]), message: firstLine(err.message) });
      return;
    }
    if (doc.contents === null) return;
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (err) {
      // e.g. "Excessive alias count indicates a resource exhaustion attack"
      result.errors.push({ document, line: lineAt(doc.contents.range?.[0]), message: firstLine((err as Error).message) });
      return;
    }
    result.documents.push({ value, lineOf: (path) => lineOfPath(doc, path, lineCounter) });
  });
  return result;
}

/** The line of the deepest YAML node on `path` that exists: the key's line for a mapping entry, the item's for a list item. */
export function lineOfPath(doc: Document, path: FieldPath, lineCounter: LineCounter): number | undefined {
  let node: unknown = doc.contents;
  let best: number | undefined = (doc.contents as YamlNode | null)?.range?.[0];
  for (const segment of path) {
    if (isMap(node)) {
      // Keys compared as text: a namespace named 2024 is the number 2024 in YAML and the key "2024" in JS.
      const pair = node.items.find((p) => {
        const key = (p.key as { value?: unknown } | null)?.value;
        return key !== undefined && key !== null && String(key) === String(segment);
      });
      if (!pair) break;
      const keyRange = (pair.key as YamlNode | null)?.range;
      if (keyRange) best = keyRange[0];
      node = pair.value;
    } else if (isSeq(node) && typeof segment === "number") {
      node = node.items[segment];
      const range = (node as YamlNode | undefined)?.range;
      if (range) best = range[0];
    } else break;
  }
  return best === undefined ? undefined : lineCounter.linePos(best).line;
}

function firstLine(message: string): string {
  return message.split("\n")[0]!;
}
