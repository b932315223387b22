// Reading manifests for the offline commands: files, folders (recursively, *.yaml|*.yml|*.json) and "-" for
// standard input; every object of every document, List kinds expanded, read as kubectl reads them
// (src/config/kube-yaml.ts). Problems are collected, not thrown.
import { readFile } from "node:fs/promises";
import { filesUnder, YAML_OR_JSON } from "../fs/files-under.ts";
import { readKubeYaml } from "../config/kube-yaml.ts";

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
  const parsed = readKubeYaml(text);
  const at = (line: number | undefined, document: number) => `${file}${line !== undefined ? `:${line}` : ""} (document ${document})`;
  for (const e of parsed.errors) problems.push(`${at(e.line, e.document)}: not valid YAML: ${e.message}`);
  for (const { value, document, lineOf } of parsed.documents) {
    const add = (v: unknown, path: ReadonlyArray<string | number>) => {
      if (v === null || v === undefined) return;
      if (typeof v !== "object" || Array.isArray(v)) {
        problems.push(`${at(lineOf(path), document)}: not a Kubernetes object (a mapping with apiVersion and kind)`);
        return;
      }
      const o = v as Record<string, unknown>;
      if (typeof o.kind === "string" && o.kind.endsWith("List") && Array.isArray(o.items)) {
        o.items.forEach((item, i) => add(item, [...path, "items", i]));
        return;
      }
      const metadataProblem = objectMetaProblem(o.metadata);
      if (metadataProblem) problems.push(`${at(lineOf([...path, "metadata", ...metadataProblem.path]), document)}: ${metadataProblem.message}`);
      else out.push(o);
    };
    add(value, []);
  }
  return out;
}

/**
 * kubectl decodes an object's metadata into the typed ObjectMeta before anything else and refuses the file when
 * that fails ("unable to decode"): a label `enabled: yes` is the boolean true, not the string "yes". The same
 * fields are checked here, so that an object kubectl cannot send is not judged as if it could.
 */
function objectMetaProblem(metadata: unknown): { path: Array<string>; message: string } | undefined {
  if (metadata === undefined || metadata === null) return undefined;
  if (typeof metadata !== "object" || Array.isArray(metadata)) return { path: [], message: "metadata must be a mapping" };
  const meta = metadata as Record<string, unknown>;
  for (const field of ["name", "namespace", "generateName"]) {
    const v = meta[field];
    if (v !== undefined && v !== null && typeof v !== "string")
      return { path: [field], message: `metadata.${field} must be a string, got ${JSON.stringify(v)} (quote it)` };
  }
  for (const field of ["labels", "annotations"]) {
    const map = meta[field];
    if (map === undefined || map === null) continue;
    if (typeof map !== "object" || Array.isArray(map)) return { path: [field], message: `metadata.${field} must be a mapping of strings` };
    for (const [key, v] of Object.entries(map)) {
      if (v !== null && typeof v !== "string")
        return { path: [field, key], message: `metadata.${field}.${key} must be a string, got ${JSON.stringify(v)} (quote it)` };
    }
  }
  return undefined;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
