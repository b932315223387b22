// PodSpecRestriction: mirrors the PodSpec. Init and ephemeral containers are held to the `containers`
// restrictions unless they have their own (`initContainers: []` opts them out: an empty list restricts
// nothing), because a privileged init container is as dangerous as a privileged container. For the same reason
// the references of OCI image volumes are held to the `containers` image restrictions unless `volumes` restricts
// `image.reference` itself: an image allowlist must not be sidestepped by mounting the image as a volume.
import { isObject } from "../primitives/json-shapes.ts";
import { CONTAINER_LISTS } from "../pod-images.ts";
import { compileContainerRestrictions } from "./container-restriction.ts";
import { compileImageRestrictions } from "./image-restriction.ts";
import { podSecurityContext } from "./security-context-restriction.ts";
import {
  anyOf,
  boolField,
  compileStruct,
  numberField,
  stringField,
  stringMapField,
  structField,
  type FieldSpec,
  type StructSpec,
} from "./struct-restriction.ts";
import { compileVolumeRestrictions } from "./volume-restriction.ts";
import {
  childOf,
  CompileContext,
  describe,
  finding,
  readListOrOne,
  readMapping,
  type Check,
  type Located,
  type RawPath,
} from "./restrictions/restriction-support.ts";

const simpleFields: StructSpec = {
  pointer: false,
  fields: {
    restartPolicy: stringField(false),
    terminationGracePeriodSeconds: numberField(true),
    activeDeadlineSeconds: numberField(true),
    dnsPolicy: stringField(false),
    nodeSelector: stringMapField(),
    automountServiceAccountToken: boolField(true),
    serviceAccountName: stringField(false),
    runtimeClassName: stringField(true),
    priorityClassName: stringField(false),
    hostUsers: boolField(true),
    os: structField({ pointer: true, fields: { name: stringField(false) } }),
    securityContext: {
      compile: (raw, path, cx) => compileStruct(raw, path, cx, podSecurityContext),
    } satisfies FieldSpec,
  },
};

const POD_SPEC_KEYS = [...Object.keys(simpleFields.fields), "volumes", ...CONTAINER_LISTS];

// PodSpec fields that PodRestrictions restrict with the pod-level security settings, as Pod Security Standards
// group them: `spec.spec.hostNetwork` is a likely first try, and the error says where it goes.
const IN_SECURITY_CONTEXT: Record<string, string> = Object.fromEntries(
  ["hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"].map((field) => [
    field,
    `PodRestrictions restrict the PodSpec's ${field} under securityContext, with the pod's other security settings (spec.spec.securityContext.${field})`,
  ]),
);

export function compilePodSpecRestriction(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  const obj = readMapping(raw, path, cx, POD_SPEC_KEYS, {}, IN_SECURITY_CONTEXT);
  if (!obj) return undefined;
  const rest = Object.fromEntries(Object.entries(obj).filter(([k]) => simpleFields.fields[k] !== undefined));
  const simple = compileStruct(rest, path, cx, simpleFields);
  const volumes = obj.volumes === undefined ? undefined : compileVolumeRestrictions(obj.volumes, [...path, "volumes"], cx);

  const perList = new Map<string, Check | undefined>();
  const containers = obj.containers === undefined ? undefined : compileContainerRestrictions(obj.containers, [...path, "containers"], cx);
  perList.set("containers", containers);
  for (const list of ["initContainers", "ephemeralContainers"] as const) {
    perList.set(list, obj[list] === undefined ? containers : compileContainerRestrictions(obj[list], [...path, list], cx));
  }
  const listRule = cx.rule(path);
  const volumeImages =
    obj.containers !== undefined && !restrictsImageVolumes(obj.volumes) ? containerImageAlternatives(obj.containers, [...path, "containers"], cx) : undefined;

  return (spec, ecx, out) => {
    if (!ecx.onlyContainers) {
      simple?.(spec, ecx, out);
      const volumesAt = childOf(spec, "volumes");
      volumes?.(volumesAt, ecx, out);
      if (volumeImages && Array.isArray(volumesAt.value)) {
        volumesAt.value.forEach((v, i) => {
          if (!isObject(v) || v.image === undefined || v.image === null) return;
          const reference: Located = { value: isObject(v.image) ? v.image.reference : undefined, field: `${volumesAt.field}[${i}].image.reference` };
          volumeImages(reference, ecx, out);
        });
      }
    }
    for (const list of CONTAINER_LISTS) {
      const check = perList.get(list);
      if (!check) continue;
      const at = childOf(spec, list);
      if (at.value === undefined || at.value === null) continue;
      if (!Array.isArray(at.value)) {
        out.push(finding(at, listRule, `must be a list, got ${describe(at.value)}`));
        continue;
      }
      at.value.forEach((c, i) => check({ value: c, field: `${at.field}[${i}]` }, ecx, out));
    }
  };
}

/** Whether some `volumes` entry restricts `image.reference` itself. */
function restrictsImageVolumes(raw: unknown): boolean {
  const entries = Array.isArray(raw) ? raw : [raw];
  return entries.some((e) => isObject(e) && isObject(e.image) && e.image.reference !== undefined);
}

/**
 * The image restrictions of the `containers` alternatives, as one check; undefined when some alternative leaves
 * the image unrestricted. Compiled a second time in a context of its own: the errors were reported once already.
 */
function containerImageAlternatives(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  const quiet = new CompileContext();
  quiet.ruleBase = cx.ruleBase;
  const alternatives: Check[] = [];
  for (const { raw: item, path: p } of readListOrOne(raw, path, quiet)) {
    if (!isObject(item) || item.image === undefined) return undefined;
    const check = compileImageRestrictions(item.image, [...p, "image"], quiet);
    if (!check) return undefined;
    alternatives.push(check);
  }
  return alternatives.length > 0 ? anyOf(alternatives) : undefined;
}
