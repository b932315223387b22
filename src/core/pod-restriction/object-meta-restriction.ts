// ObjectMetaRestriction: the pod's name, labels and annotations. For a workload's pod template the name
// restriction does not apply: the pods it creates get generated names.
import { compileStruct, stringField, stringMapField, type StructSpec } from "./struct-restriction.ts";
import type { Check, CompileContext, RawPath } from "./restrictions/restriction-support.ts";

const objectMeta: StructSpec = {
  pointer: false,
  fields: {
    name: { ...stringField(false), appliesTo: (cx) => !cx.isTemplate },
    labels: stringMapField(),
    annotations: stringMapField(),
  },
};

export function compileObjectMetaRestriction(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  return compileStruct(raw, path, cx, objectMeta);
}
