// Namespace labels given on the command line of `check` and `imprimatur test`, so policies bound with a
// namespaceSelector can be tried without writing a namespaces file:
//   --namespace-labels team-a:env=prod,tier=web   (repeatable; "team-a:" alone: a namespace with no labels)
// Each namespace also carries kubernetes.io/metadata.name, as Kubernetes sets it (and the namespaces file does).
import { labelKeyProblem, labelValueProblem } from "../core/label-selector.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import { UsageError } from "./args.ts";

/** namespace → labels */
export type NamespaceLabels = ReadonlyMap<string, Readonly<Record<string, string>>>;

export const NAMESPACE_LABELS_SYNTAX = "NAMESPACE:KEY=VALUE[,KEY=VALUE…]";

// A namespace is a DNS label; label keys and values are checked as Kubernetes checks them (core/label-selector).
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Parses every --namespace-labels value; a namespace given twice gets both sets of labels. Throws UsageError. */
export function parseNamespaceLabels(values: readonly string[]): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>();
  for (const value of values) {
    const colon = value.indexOf(":");
    const bad = (why: string) =>
      new UsageError(`--namespace-labels ${JSON.stringify(value)}: ${why}; expected ${NAMESPACE_LABELS_SYNTAX}, e.g. team-a:env=prod,tier=web`);
    if (colon < 0) throw bad("no namespace (NAMESPACE: comes first)");
    const namespace = value.slice(0, colon);
    if (!NAMESPACE.test(namespace)) throw bad(`${JSON.stringify(namespace)} is not a namespace name`);
    const labels = out.get(namespace) ?? { "kubernetes.io/metadata.name": namespace };
    const list = value.slice(colon + 1);
    for (const pair of list === "" ? [] : list.split(",")) {
      const eq = pair.indexOf("=");
      if (eq < 0) throw bad(`${JSON.stringify(pair)} is not KEY=VALUE`);
      const key = pair.slice(0, eq);
      const v = pair.slice(eq + 1);
      const problem = labelKeyProblem(key) ?? labelValueProblem(v);
      if (problem !== undefined) throw bad(problem);
      labels[key] = v;
    }
    out.set(namespace, labels);
  }
  return out;
}

/** `base` with the given namespaces' labels added (over base's own labels for the same key). */
export function withLabels(base: NamespaceLabelSource, given: NamespaceLabels): NamespaceLabelSource {
  return {
    labels: (namespace) => {
      const extra = given.get(namespace);
      const known = base.labels(namespace);
      return extra === undefined ? known : { ...(known ?? {}), ...extra };
    },
  };
}

/** The labels of `over` on top of `under`, namespace by namespace. */
export function mergeNamespaceLabels(under: NamespaceLabels, over: NamespaceLabels): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>([...under].map(([ns, l]) => [ns, { ...l }]));
  for (const [ns, labels] of over) out.set(ns, { ...(out.get(ns) ?? {}), ...labels });
  return out;
}
