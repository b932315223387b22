// Where a Kubernetes object keeps the Pod spec it will run: the Pod itself, or the pod template of a
// built-in workload controller.
import { asObject, stringMap } from "./json-shapes.ts";

export interface PodSpecLocation {
  spec: Record<string, unknown> | undefined;
  annotations: Record<string, string>;
  /** Prefix of field paths inside the object, e.g. "spec.template.spec." */
  fieldPrefix: string;
}

const TEMPLATE_KINDS: Record<string, string[]> = {
  Deployment: ["spec", "template"],
  ReplicaSet: ["spec", "template"],
  StatefulSet: ["spec", "template"],
  DaemonSet: ["spec", "template"],
  Job: ["spec", "template"],
  ReplicationController: ["spec", "template"],
  PodTemplate: ["template"],
  CronJob: ["spec", "jobTemplate", "spec", "template"],
};

export function podSpecLocation(obj: Record<string, unknown>): PodSpecLocation | undefined {
  const kind = obj.kind;
  if (kind === "Pod") {
    return { spec: asObject(obj.spec), annotations: stringMap(asObject(obj.metadata)?.annotations), fieldPrefix: "spec." };
  }
  if (typeof kind !== "string" || !Object.hasOwn(TEMPLATE_KINDS, kind)) return undefined;
  const path = TEMPLATE_KINDS[kind]!;
  let template: unknown = obj;
  for (const seg of path) template = asObject(template)?.[seg];
  const t = asObject(template);
  return {
    spec: asObject(t?.spec),
    annotations: stringMap(asObject(t?.metadata)?.annotations),
    fieldPrefix: `${path.join(".")}.spec.`,
  };
}
