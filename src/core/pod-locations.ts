// Where the pods of an admitted object sit in it: the field path of each image and of each pod's (or template's)
// metadata, and the JSON patch that annotates that metadata. Shared by the subject (which finds them), pinning
// and verification (which annotate them), below all three.
import { escapePointerSegment, fieldPathToPointer } from "./primitives/field-path.ts";
import type { JsonPatchOperation } from "./decision.ts";
import { isObject } from "./primitives/json-shapes.ts";

export interface ImageAt {
  image: string;
  /** Field path in the admitted object: "spec.template.spec.containers[0].image". */
  field: string;
  /** Which pod of the object (index into the object's pods, in the order the subject lists them). */
  pod: number;
}

/** Where to record pins and verifications; a missing entry (e.g. the v1.20 EphemeralContainers object) records nothing. */
export interface PodMetadataAt {
  /** The pod's (or template's) metadata object as it is in the request; undefined when absent. */
  value: unknown;
  /** Field path of that metadata: "metadata", "spec.template.metadata". */
  field: string;
}

/**
 * Sets one annotation on a pod's (or template's) metadata, creating metadata or annotations when absent.
 * `createdEarlier`: an earlier patch of the same answer already created the annotations map.
 */
export function setAnnotationPatch(pod: PodMetadataAt, key: string, value: string, createdEarlier: boolean): JsonPatchOperation {
  const metaPointer = fieldPathToPointer(pod.field);
  const metadata = isObject(pod.value) ? pod.value : undefined;
  const annotations = metadata && isObject(metadata.annotations) ? metadata.annotations : undefined;
  if (!createdEarlier && !metadata) return { op: "add", path: metaPointer, value: { annotations: { [key]: value } } };
  if (!createdEarlier && !annotations) return { op: "add", path: `${metaPointer}/annotations`, value: { [key]: value } };
  return { op: "add", path: `${metaPointer}/annotations/${escapePointerSegment(key)}`, value };
}
