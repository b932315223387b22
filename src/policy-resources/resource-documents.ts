// A policy custom resource as the loader sees it: the same document a policy file would hold. The API's own
// bookkeeping (uid, resourceVersion, managedFields, the last-applied annotation) and the status Imprimatur
// writes are left out; every other field is kept, unknown ones included, so the loader names them. Pure.
import { isObject } from "../core/primitives/json-shapes.ts";

/** What Imprimatur needs of a custom resource read from the API. */
export interface PolicyResourceObject {
  kind: string;
  name: string;
  /** Set for the namespaced kinds. */
  namespace?: string;
  uid: string;
  generation: number;
  /** The object as the API returned it. */
  object: Record<string, unknown>;
}

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** How errors name a custom resource: "ImagePolicy/name", "NamespacedImagePolicy/shop/name" (a file's errors name its path). */
export function resourceOrigin(r: Pick<PolicyResourceObject, "kind" | "name" | "namespace">): string {
  return `${r.kind}/${resourceKey(r)}`;
}

/** What identifies a resource within its kind: its name, or "namespace/name" for a namespaced kind. */
export function resourceKey(r: Pick<PolicyResourceObject, "name" | "namespace">): string {
  return r.namespace === undefined ? r.name : `${r.namespace}/${r.name}`;
}

/** The policy document of a custom resource, as a file would hold it. */
export function policyDocumentOf(object: Record<string, unknown>): Record<string, unknown> {
  const { metadata, status: _status, ...rest } = object;
  const meta = isObject(metadata) ? metadata : {};
  const annotations = isObject(meta.annotations) ? Object.fromEntries(Object.entries(meta.annotations).filter(([k]) => k !== LAST_APPLIED)) : {};
  return {
    ...rest,
    metadata: {
      name: meta.name,
      ...(typeof meta.namespace === "string" ? { namespace: meta.namespace } : {}),
      ...(isObject(meta.labels) && Object.keys(meta.labels).length > 0 ? { labels: meta.labels } : {}),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
  };
}

/**
 * What makes a resource's policy change: a new object, a new generation (spec), or other labels or
 * annotations (PodRestriction reads its description annotation). Status writes change none of these.
 */
export function contentKey(r: PolicyResourceObject): string {
  const meta = isObject(r.object.metadata) ? r.object.metadata : {};
  const annotations = isObject(meta.annotations) ? Object.fromEntries(Object.entries(meta.annotations).filter(([k]) => k !== LAST_APPLIED)) : {};
  return JSON.stringify([r.uid, r.generation, meta.labels ?? null, annotations]);
}

/** The fields of an API object Imprimatur keys on; undefined when it lacks a name or uid. */
export function policyResourceOf(kind: string, object: unknown): PolicyResourceObject | undefined {
  if (!isObject(object) || !isObject(object.metadata)) return undefined;
  const { name, namespace, uid, generation } = object.metadata;
  if (typeof name !== "string" || typeof uid !== "string") return undefined;
  return { kind, name, ...(typeof namespace === "string" ? { namespace } : {}), uid, generation: typeof generation === "number" ? generation : 0, object };
}
