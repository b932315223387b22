// Namespace labels from a file, for offline `check` and for `serve` without Kubernetes API access:
// either a map {namespace: {label: value}} or a list of Namespace objects (kubectl get ns -o yaml).
import { readFile } from "node:fs/promises";
import { parseAllDocuments } from "yaml";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";

export async function loadNamespacesFile(file: string): Promise<NamespaceLabelSource> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (e) {
    throw new Error(`${file}: cannot read namespaces file: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const table = new Map<string, Record<string, string>>();
  for (const doc of parseAllDocuments(text) as ReturnType<typeof parseAllDocuments> & unknown[]) {
    if (doc.errors.length) throw new Error(`${file}: not valid YAML: ${doc.errors[0]!.message.split("\n")[0]}`);
    addNamespaces(doc.toJS(), table, file);
  }
  return { labels: (ns) => table.get(ns) };
}

function addNamespaces(v: unknown, table: Map<string, Record<string, string>>, file: string): void {
  if (v === null || v === undefined) return;
  if (typeof v !== "object") throw new Error(`${file}: expected a map of namespace → labels or Namespace objects`);
  const o = v as Record<string, unknown>;
  if (o.kind === "List" || o.kind === "NamespaceList") {
    for (const item of (o.items as unknown[]) ?? []) addNamespaces(item, table, file);
    return;
  }
  if (o.kind === "Namespace") {
    const meta = (o.metadata ?? {}) as { name?: string; labels?: Record<string, string> };
    if (!meta.name) throw new Error(`${file}: a Namespace without metadata.name`);
    table.set(meta.name, withDefaultName(meta.name, meta.labels ?? {}));
    return;
  }
  for (const [name, labels] of Object.entries(o)) {
    if (typeof labels !== "object" || labels === null) throw new Error(`${file}: labels of namespace ${JSON.stringify(name)} must be a map`);
    table.set(name, withDefaultName(name, labels as Record<string, string>));
  }
}

/** Kubernetes sets kubernetes.io/metadata.name on every namespace; do the same so selectors behave alike. */
function withDefaultName(name: string, labels: Record<string, string>): Record<string, string> {
  return { "kubernetes.io/metadata.name": name, ...labels };
}
