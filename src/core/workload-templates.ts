// Where a Kubernetes object keeps the pods it will run: the Pod itself, the pod template of a built-in
// workload controller, or templates inside custom resources registered in the server config.
import { asObject, isObject } from "./primitives/json-shapes.ts";
import type { PodUnderReview } from "./pod-under-review.ts";

/** A kind that embeds pod templates: where they are, as paths such as "spec.template" or "spec.tasks[*].pod". */
export interface TemplateKind {
  group: string;
  kind: string;
  /** Paths to PodTemplateSpecs (metadata + spec). */
  templates: string[];
  /** Paths to bare PodSpecs. */
  podSpecs?: string[];
}

const BUILTIN_TEMPLATE_KINDS: readonly TemplateKind[] = [
  { group: "apps", kind: "Deployment", templates: ["spec.template"] },
  { group: "apps", kind: "ReplicaSet", templates: ["spec.template"] },
  { group: "apps", kind: "StatefulSet", templates: ["spec.template"] },
  { group: "apps", kind: "DaemonSet", templates: ["spec.template"] },
  { group: "batch", kind: "Job", templates: ["spec.template"] },
  { group: "batch", kind: "CronJob", templates: ["spec.jobTemplate.spec.template"] },
  { group: "", kind: "ReplicationController", templates: ["spec.template"] },
  { group: "", kind: "PodTemplate", templates: ["template"] },
];

/** Checks a template path: dot-separated field names, each optionally followed by [*] to visit every element. */
export function checkTemplatePath(path: string): string | undefined {
  if (!/^[A-Za-z0-9_]+(\[\*\])?(\.[A-Za-z0-9_]+(\[\*\])?)*$/.test(path)) {
    return `invalid path ${JSON.stringify(path)}: use field names separated by ".", with [*] after a list field (e.g. spec.tasks[*].template)`;
  }
  return undefined;
}

function groupOf(apiVersion: unknown): string {
  if (typeof apiVersion !== "string") return "";
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? "" : apiVersion.slice(0, slash);
}

/** Every pod the object describes, as PodRestrictions see them; empty for objects that run no pods. */
export function podsInObject(obj: Record<string, unknown>, extraKinds: readonly TemplateKind[] = []): PodUnderReview[] {
  if (obj.kind === "Pod" && groupOf(obj.apiVersion) === "") {
    return [{ metadata: { value: obj.metadata, field: "metadata" }, spec: { value: obj.spec, field: "spec" }, isTemplate: false }];
  }
  const group = groupOf(obj.apiVersion);
  const kind = [...BUILTIN_TEMPLATE_KINDS, ...extraKinds].find((k) => k.kind === obj.kind && k.group === group);
  if (!kind) return [];
  const pods: PodUnderReview[] = [];
  for (const path of kind.templates) {
    for (const t of valuesAt(obj, path)) {
      const template = asObject(t.value);
      pods.push({
        metadata: { value: template?.metadata, field: `${t.field}.metadata` },
        spec: { value: template?.spec, field: `${t.field}.spec` },
        isTemplate: true,
      });
    }
  }
  for (const path of kind.podSpecs ?? []) {
    for (const s of valuesAt(obj, path)) pods.push({ metadata: { value: undefined, field: "metadata" }, spec: s, isTemplate: true });
  }
  return pods;
}

/** Values at a template path with their field paths; missing steps yield nothing. */
function valuesAt(obj: unknown, path: string): Array<{ value: unknown; field: string }> {
  let current: Array<{ value: unknown; field: string }> = [{ value: obj, field: "" }];
  for (const seg of path.split(".")) {
    const each = seg.endsWith("[*]");
    const name = each ? seg.slice(0, -3) : seg;
    const next: Array<{ value: unknown; field: string }> = [];
    for (const c of current) {
      if (!isObject(c.value) || !Object.hasOwn(c.value, name)) continue;
      const v = c.value[name];
      const field = c.field === "" ? name : `${c.field}.${name}`;
      if (!each) next.push({ value: v, field });
      else if (Array.isArray(v)) v.forEach((item, i) => next.push({ value: item, field: `${field}[${i}]` }));
    }
    current = next;
  }
  return current.filter((c) => c.value !== undefined && c.value !== null);
}
