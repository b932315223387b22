// Unknown fields in a Pod or pod template (`contianers:`), found with the field lists of the Kubernetes API types
// a Pod is made of (pod-fields.generated.json, written by scripts/generate-pod-fields.ts from the models the
// Kubernetes OpenAPI generates), so the list of known fields follows the Kubernetes API instead of being written by
// hand here.
import { readFileSync } from "node:fs";
import { isObject } from "../core/primitives/json-shapes.ts";
import type { SubjectPod } from "../core/admission-subject.ts";

const FIELD_TYPES = JSON.parse(readFileSync(new URL("./pod-fields.generated.json", import.meta.url), "utf8")) as Record<string, Record<string, string>>;
const fieldsCache = new Map<string, Map<string, string> | undefined>();

/** JSON field → type name for a model ("V1PodSpec"), or undefined for scalars, quantities and free-form objects. */
function fieldsOf(model: string): Map<string, string> | undefined {
  if (!fieldsCache.has(model)) {
    const fields = Object.hasOwn(FIELD_TYPES, model) ? FIELD_TYPES[model] : undefined;
    fieldsCache.set(model, fields ? new Map(Object.entries(fields)) : undefined);
  }
  return fieldsCache.get(model);
}

export interface UnknownField {
  /** Field path in the object: "spec.template.spec.contianers". */
  field: string;
  /** The model it is not part of: "PodSpec". */
  model: string;
}

/** The unknown fields of a pod's metadata and spec (or only its containers, for ephemeral-container updates). */
export function unknownPodFields(pod: SubjectPod): UnknownField[] {
  const out: UnknownField[] = [];
  if (pod.onlyContainers) {
    const list = isObject(pod.spec.value) ? pod.spec.value.ephemeralContainers : undefined;
    walk(list, "Array<V1EphemeralContainer>", join(pod.spec.field, "ephemeralContainers"), out);
    return out;
  }
  if (pod.metadata.value !== undefined) walk(pod.metadata.value, "V1ObjectMeta", pod.metadata.field, out);
  walk(pod.spec.value, "V1PodSpec", pod.spec.field, out);
  return out;
}

function walk(value: unknown, type: string, field: string, out: UnknownField[]): void {
  if (value === null || value === undefined) return;
  const list = /^Array<(.+)>$/.exec(type);
  if (list) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, list[1]!, `${field}[${i}]`, out));
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (isObject(value)) for (const [k, v] of Object.entries(value)) walk(v, map[1]!, `${field}[${k}]`, out);
    return;
  }
  const fields = fieldsOf(type);
  if (!fields || !isObject(value)) return; // scalars, IntOrString, quantities, free-form objects
  for (const [key, v] of Object.entries(value)) {
    const childType = fields.get(key);
    if (childType === undefined) out.push({ field: join(field, key), model: type.replace(/^V1/, "") });
    else walk(v, childType, join(field, key), out);
  }
}

function join(prefix: string, key: string): string {
  return prefix ? `${prefix}.${key}` : key;
}
