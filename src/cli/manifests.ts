// Reading manifests for the offline commands: files, folders (recursively, *.yaml|*.yml|*.json) and "-" for
// standard input; every object of every document, List kinds expanded. Problems are collected, not thrown.
import { readFile } from "node:fs/promises";
import { filesUnder, YAML_OR_JSON } from "../fs/files-under.ts";
import { parseAllDocuments } from "yaml";

export interface ManifestObject {
  /** The file it came from ("-" for standard input). */
  file: string;
  object: Record<string, unknown>;
}

export async function readManifests(targets: readonly string[], problems: string[]): Promise<ManifestObject[]> {
  const out: ManifestObject[] = [];
  for (const target of targets) {
    for (const file of await manifestFiles(target, problems)) {
      let text: string;
      try {
        text = file === "-" ? await readStdin() : await readFile(file, "utf8");
      } catch (e) {
        problems.push(`${file}: cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        continue;
      }
      for (const object of manifestObjects(text, file, problems)) out.push({ file, object });
    }
  }
  return out;
}

async function manifestFiles(target: string, problems: string[]): Promise<string[]> {
  if (target === "-") return ["-"];
  try {
    return await filesUnder(target, YAML_OR_JSON);
  } catch (e) {
    problems.push(`${target}: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "no such file or directory" : (e as Error).message}`);
    return [];
  }
}

/** Every object in a multi-document text, with List kinds expanded. */
export function manifestObjects(text: string, file: string, problems: string[]): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) return out;
  docs.forEach((doc, i) => {
    if (doc.errors.length > 0) {
      problems.push(`${file} (document ${i + 1}): not valid YAML: ${doc.errors[0]!.message.split("\n")[0]}`);
      return;
    }
    const add = (v: unknown) => {
      if (v === null || v === undefined) return;
      if (typeof v !== "object" || Array.isArray(v)) {
        problems.push(`${file} (document ${i + 1}): not a Kubernetes object (a mapping with apiVersion and kind)`);
        return;
      }
      const o = v as Record<string, unknown>;
      if (typeof o.kind === "string" && o.kind.endsWith("List") && Array.isArray(o.items)) o.items.forEach(add);
      else out.push(o);
    };
    add(doc.toJS({ maxAliasCount: 50 }));
  });
  return out;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
