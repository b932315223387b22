// Reads policy files (multi-document YAML or JSON) from a folder or file, validates each document with the
// JSON Schema, compiles it, and reports every problem with file, document, line, field path and reason.
import { readdir, readFile, stat } from "node:fs/promises";
import { join, relative } from "node:path";
import { Ajv, type ErrorObject } from "ajv";
import { isMap, isSeq, LineCounter, parseAllDocuments, type Document, type Node as YamlNode } from "yaml";
import imagePolicySchema from "./schema/image-policy.schema.json" with { type: "json" };
import type { ImagePolicy } from "../core/image-policy.ts";
import { compilePodRestriction, type PodRestriction } from "../core/pod-restriction/pod-restriction.ts";
import { compileImagePolicy, type RawImagePolicy } from "./compile-image-policy.ts";
import { formatPath, PolicyLoadError, type PolicyError } from "./policy-error.ts";
import { profileSources, shippedProfiles } from "./profiles.ts";

export const POLICY_API_VERSION = "imprimatur.dev/v1alpha1";
/** The PodRestrictions seed writes policy/v1alpha1; its examples load unchanged. */
const SEED_POD_RESTRICTION_API_VERSION = "policy/v1alpha1";
const KNOWN_KINDS = ["ImagePolicy", "PodRestriction"];
const MAX_POLICY_FILE_BYTES = 4 * 1024 * 1024;

export interface PolicySet {
  imagePolicies: ImagePolicy[];
  podRestrictions: PodRestriction[];
  /** Files read, relative to the root given. */
  files: string[];
}

const ajv = new Ajv({ allErrors: true, strict: true, useDefaults: false });
const validateImagePolicy = ajv.compile(imagePolicySchema);

/** Loads every *.yaml, *.yml and *.json under `root` (a folder, recursively, or one file). Throws PolicyLoadError. */
export async function loadPolicies(root: string): Promise<PolicySet> {
  const files = await listPolicyFiles(root);
  const errors: PolicyError[] = [];
  const imagePolicies: ImagePolicy[] = [];
  const podRestrictions: PodRestriction[] = [];
  const profiles = profileSources(await shippedProfiles());
  for (const file of files) {
    const shown = relative(process.cwd(), file) || file;
    let text: string;
    try {
      const info = await stat(file);
      if (info.size > MAX_POLICY_FILE_BYTES) {
        errors.push({ file: shown, message: `file is ${info.size} bytes; the limit is ${MAX_POLICY_FILE_BYTES}` });
        continue;
      }
      text = await readFile(file, "utf8");
    } catch (e) {
      errors.push({ file: shown, message: `cannot read: ${(e as Error).message}` });
      continue;
    }
    const parsed = parsePolicyText(text, shown, { profiles });
    errors.push(...parsed.errors);
    imagePolicies.push(...parsed.imagePolicies);
    podRestrictions.push(...parsed.podRestrictions);
  }
  errors.push(...duplicateNames("ImagePolicy", imagePolicies), ...duplicateNames("PodRestriction", podRestrictions));
  if (errors.length > 0) throw new PolicyLoadError(errors);
  return { imagePolicies, podRestrictions, files: files.map((f) => relative(root, f) || f) };
}

function duplicateNames(kind: string, policies: ReadonlyArray<{ name: string; source?: { file: string; document: number } }>): PolicyError[] {
  const errors: PolicyError[] = [];
  const seen = new Map<string, (typeof policies)[number]>();
  for (const p of policies) {
    const before = seen.get(p.name);
    if (before) {
      errors.push({
        file: p.source?.file ?? "?",
        ...(p.source ? { document: p.source.document } : {}),
        path: "metadata.name",
        message: `${kind} ${JSON.stringify(p.name)} is already defined in ${before.source?.file ?? "?"}`,
      });
    }
    seen.set(p.name, p);
  }
  return errors;
}

export interface ParsedPolicies {
  imagePolicies: ImagePolicy[];
  podRestrictions: PodRestriction[];
  errors: PolicyError[];
}

/** Parses one file's text (pure). `profiles` are the raw profile documents a PodRestriction may include. */
export function parsePolicyText(text: string, file: string, opts: { profiles?: ReadonlyMap<string, unknown> } = {}): ParsedPolicies {
  const lineCounter = new LineCounter();
  const errors: PolicyError[] = [];
  const imagePolicies: ImagePolicy[] = [];
  const podRestrictions: PodRestriction[] = [];
  const docs = parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (!Array.isArray(docs)) {
    // An empty stream parses to an EmptyStream; nothing to load.
    return { imagePolicies, podRestrictions, errors };
  }
  docs.forEach((doc, i) => {
    const document = i + 1;
    const lineOf = (offset: number | undefined) => (offset === undefined ? undefined : lineCounter.linePos(offset).line);
    if (doc.errors.length > 0) {
      for (const err of doc.errors) {
        errors.push({ file, document, line: lineOf(err.pos[0]), message: `YAML: ${err.message.split("\n")[0]}` });
      }
      return;
    }
    if (doc.contents === null) return; // empty document between separators
    const value: unknown = doc.toJS({ maxAliasCount: 50 });
    const startLine = lineOf(doc.contents.range?.[0]);
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      errors.push({ file, document, line: startLine, message: "a policy document must be a mapping with apiVersion and kind" });
      return;
    }
    const obj = value as Record<string, unknown>;
    const at = (path: Array<string | number>) => lineOfPath(doc, path, lineCounter) ?? startLine;
    if (obj.kind === "PodRestriction" && (obj.apiVersion === POLICY_API_VERSION || obj.apiVersion === SEED_POD_RESTRICTION_API_VERSION)) {
      const compiled = compilePodRestriction(obj, { source: { file, document }, ...(opts.profiles ? { profiles: opts.profiles } : {}) });
      for (const e of compiled.issues) errors.push({ file, document, line: at(e.path), path: formatPath(e.path), message: e.message });
      if (compiled.policy) podRestrictions.push(compiled.policy);
      return;
    }
    if (obj.apiVersion !== POLICY_API_VERSION) {
      errors.push({ file, document, line: at(["apiVersion"]), path: "apiVersion", message: `must be ${JSON.stringify(POLICY_API_VERSION)}, got ${JSON.stringify(obj.apiVersion ?? null)}` });
      return;
    }
    if (obj.kind !== "ImagePolicy") {
      errors.push({ file, document, line: at(["kind"]), path: "kind", message: `unknown kind ${JSON.stringify(obj.kind ?? null)}; known kinds: ${KNOWN_KINDS.join(", ")}` });
      return;
    }
    if (!validateImagePolicy(obj)) {
      for (const e of validateImagePolicy.errors ?? []) {
        const { path, message } = describeSchemaError(e);
        errors.push({ file, document, line: lineOfPath(doc, path, lineCounter) ?? startLine, path: formatPath(path), message });
      }
      return;
    }
    const compiled = compileImagePolicy(obj as unknown as RawImagePolicy, { file, document });
    for (const e of compiled.errors) {
      errors.push({ file, document, line: lineOfPath(doc, e.path, lineCounter) ?? startLine, path: formatPath(e.path), message: e.message });
    }
    if (compiled.policy) imagePolicies.push(compiled.policy);
  });
  return { imagePolicies, podRestrictions, errors };
}

function describeSchemaError(e: ErrorObject): { path: Array<string | number>; message: string } {
  const path: Array<string | number> = e.instancePath
    .split("/")
    .slice(1)
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
  switch (e.keyword) {
    case "additionalProperties":
      return { path: [...path, String(e.params.additionalProperty)], message: `unknown field ${JSON.stringify(e.params.additionalProperty)}` };
    case "required":
      return { path, message: `missing required field ${JSON.stringify(e.params.missingProperty)}` };
    case "enum":
      return { path, message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(", ")}` };
    case "const":
      return { path, message: `must be ${JSON.stringify(e.params.allowedValue)}` };
    default:
      return { path, message: e.message ?? e.keyword };
  }
}

/** The line of the deepest existing YAML node on `path`. */
function lineOfPath(doc: Document, path: Array<string | number>, lc: LineCounter): number | undefined {
  let node: unknown = doc.contents;
  let best: number | undefined = (doc.contents as YamlNode | null)?.range?.[0];
  for (const seg of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => (p.key as { value?: unknown } | null)?.value === seg);
      if (!pair) break;
      const keyRange = (pair.key as YamlNode | null)?.range;
      if (keyRange) best = keyRange[0];
      node = pair.value;
    } else if (isSeq(node) && typeof seg === "number") {
      node = node.items[seg];
      const range = (node as YamlNode | undefined)?.range;
      if (range) best = range[0];
    } else break;
  }
  return best === undefined ? undefined : lc.linePos(best).line;
}

async function listPolicyFiles(root: string): Promise<string[]> {
  let info;
  try {
    info = await stat(root);
  } catch (e) {
    throw new PolicyLoadError([{ file: root, message: `cannot read policy path: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` }]);
  }
  if (info.isFile()) return [root];
  const out: string[] = [];
  const walk = async (dir: string) => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const e of entries) {
      if (e.name.startsWith(".")) continue; // ConfigMap mounts keep ..data symlinks; hidden files are not policies
      const full = join(dir, e.name);
      if (e.isDirectory()) await walk(full);
      else if (/\.(ya?ml|json)$/i.test(e.name)) out.push(full);
    }
  };
  await walk(root);
  return out;
}
