// PodSpecRestriction: mirrors the PodSpec. Init and ephemeral containers are held to the `containers`
// restrictions unless they have their own (`initContainers: []` opts them out: an empty list restricts
// nothing), because a privileged init container is as dangerous as a privileged container.
import { CONTAINER_LISTS } from "../pod-images.ts";
import { compileContainerRestrictions } from "./container-restriction.ts";
import { podSecurityContext } from "./security-context-restriction.ts";
import { boolField, compileStruct, numberField, stringField, stringMapField, structField, type FieldSpec, type StructSpec } from "./struct-restriction.ts";
import { compileVolumeRestrictions } from "./volume-restriction.ts";
import { childOf, describe, finding, readMapping, type Check, type CompileContext, type RawPath } from "./restrictions/restriction-support.ts";

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

export function compilePodSpecRestriction(raw: unknown, path: RawPath, cx: CompileContext): Check | undefined {
  const obj = readMapping(raw, path, cx, POD_SPEC_KEYS);
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

  return (spec, ecx, out) => {
    if (!ecx.onlyContainers) {
      simple?.(spec, ecx, out);
      volumes?.(childOf(spec, "volumes"), ecx, out);
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
