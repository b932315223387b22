// Namespace labels from a file, for offline `check` and for `serve` without Kubernetes API access:
// either a map {namespace: {label: value}} or a list of Namespace objects (kubectl get ns -o yaml), in one or
// more YAML documents. Every problem is reported at once, with its line.
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import { ConfigChecks, isMapping, readConfigText, yamlDocuments } from "./config-checks.ts";
import type { FieldPath } from "./kube-yaml.ts";

type Table = Map<string, Record<string, string>>;

/** Reads a namespaces file. Throws a ConfigError listing every problem with its line and field. */
export async function loadNamespacesFile(file: string): Promise<NamespaceLabelSource> {
  const text = await readConfigText(file, "namespaces file");
  const table: Table = new Map();
  const checks = new ConfigChecks(file);
  for (const document of yamlDocuments(text, file)) addNamespaces(document.value, [], table, checks.withLines(document.lineOf));
  checks.throwIfAny();
  return { labels: (ns) => table.get(ns) };
}

function addNamespaces(v: unknown, path: FieldPath, table: Table, checks: ConfigChecks): void {
  if (v === null || v === undefined) return;
  if (!isMapping(v)) {
    checks.problem(path, "expected a map of namespace → labels or Namespace objects");
    return;
  }
  if (v.kind === "List" || v.kind === "NamespaceList") {
    const items = v.items === undefined || v.items === null ? [] : (checks.list(v.items, [...path, "items"]) ?? []);
    items.forEach((item, i) => addNamespaces(item, [...path, "items", i], table, checks));
    return;
  }
  if (v.kind === "Namespace") {
    const meta = v.metadata;
    if (!isMapping(meta) || typeof meta.name !== "string" || meta.name === "") {
      checks.problem([...path, "metadata", "name"], "a Namespace needs metadata.name");
      return;
    }
    const labels = meta.labels === undefined || meta.labels === null ? {} : stringMap(meta.labels, [...path, "metadata", "labels"], checks);
    if (labels) table.set(meta.name, withDefaultName(meta.name, labels));
    return;
  }
  if (typeof v.kind === "string") {
    checks.problem([...path, "kind"], `is ${JSON.stringify(v.kind)}; expected Namespace, NamespaceList or List (or a map of namespace → labels)`);
    return;
  }
  for (const [name, labels] of Object.entries(v)) {
    const map = stringMap(labels, [...path, name], checks, `labels of namespace ${JSON.stringify(name)} must be a map`);
    if (map) table.set(name, withDefaultName(name, map));
  }
}

/** Labels: a map of strings (a YAML 1 or true is not the label value "1" or "true"; quote it). */
function stringMap(value: unknown, path: FieldPath, checks: ConfigChecks, notMap = "must be a map of label → value"): Record<string, string> | undefined {
  if (!isMapping(value)) return checks.problem(path, notMap);
  let ok = true;
  for (const [key, v] of Object.entries(value)) {
    if (typeof v === "string") continue;
    checks.problem([...path, key], `label value must be a string, got ${JSON.stringify(v)}; quote it`);
    ok = false;
  }
  return ok ? (value as Record<string, string>) : undefined;
}

/** Kubernetes sets kubernetes.io/metadata.name on every namespace; do the same so selectors behave alike. */
function withDefaultName(name: string, labels: Record<string, string>): Record<string, string> {
  return { "kubernetes.io/metadata.name": name, ...labels };
}
