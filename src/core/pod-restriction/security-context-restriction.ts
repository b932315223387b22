// Restrictions on security contexts: the container's SecurityContext and the pod's PodSecurityContext,
// and the option structs both share (seccompProfile, appArmorProfile, seLinuxOptions, windowsOptions).
//
// A container is checked on its EFFECTIVE settings, as the kubelet computes them: a field the container
// leaves unset takes the pod's value (runAsUser, runAsGroup, runAsNonRoot, seccompProfile, appArmorProfile,
// seLinuxOptions as whole structs; windowsOptions field by field). A denial then names the pod-level field
// and says for which container it was effective.
import {
  boolField,
  numberField,
  numberListField,
  stringField,
  stringListField,
  stringMapField,
  structField,
  type FieldSpec,
  type StructSpec,
} from "./struct-restriction.ts";
import { childOf, isNil, joinField, type Located } from "./restrictions/restriction-support.ts";
import { isObject } from "../primitives/json-shapes.ts";

const profileStruct: StructSpec = {
  pointer: true,
  fields: { type: stringField(false), localhostProfile: stringField(true) },
};

const seLinuxOptions: StructSpec = {
  pointer: true,
  fields: { user: stringField(false), role: stringField(false), type: stringField(false), level: stringField(false) },
};

const windowsOptions: StructSpec = {
  pointer: true,
  fields: {
    gmsaCredentialSpecName: stringField(true),
    gmsaCredentialSpec: stringField(true),
    runAsUserName: stringField(true),
    hostProcess: boolField(true),
  },
};

const capabilities: StructSpec = {
  pointer: true,
  fields: { add: stringListField(), drop: stringListField() },
};

/** Fields a container inherits from the pod's security context when it leaves them unset. */
const INHERITED = new Set(["runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile", "appArmorProfile", "seLinuxOptions", "windowsOptions"]);

export const containerSecurityContext: StructSpec = {
  pointer: true,
  fields: {
    privileged: boolField(true),
    capabilities: structField(capabilities),
    runAsUser: numberField(true),
    runAsGroup: numberField(true),
    runAsNonRoot: boolField(true),
    readOnlyRootFilesystem: boolField(true),
    allowPrivilegeEscalation: boolField(true),
    procMount: stringField(true),
    seccompProfile: structField(profileStruct),
    appArmorProfile: structField(profileStruct),
    seLinuxOptions: structField(seLinuxOptions),
    windowsOptions: structField(windowsOptions),
  },
};

/** The container's securityContext as a located value whose inheritable fields fall back to the pod's. */
export function effectiveSecurityContext(container: Located, podSpec: Located): Located {
  const own = childOf(container, "securityContext");
  const pod = childOf(podSpec, "securityContext");
  const note = `set at pod level, effective for ${container.field}`;
  return {
    ...own,
    childOf: (key) => {
      const mine = { ...childOf(own, key), parentPresent: isObject(own.value) };
      if (!INHERITED.has(key)) return mine;
      const fromPod = { ...childOf(pod, key), parentPresent: true };
      if (key === "windowsOptions") return mergedWindowsOptions(mine, fromPod, note);
      return isNil(mine.value) && !isNil(fromPod.value) ? { ...fromPod, note } : mine;
    },
  };
}

/** windowsOptions merge field by field (the GMSA pair together), as the kubelet does. */
function mergedWindowsOptions(mine: Located, fromPod: Located, note: string): Located {
  if (isNil(fromPod.value)) return mine;
  if (isNil(mine.value)) return { ...fromPod, note };
  const own = isObject(mine.value) ? mine.value : {};
  return {
    ...mine,
    childOf: (key) => {
      const group = key === "gmsaCredentialSpec" || key === "gmsaCredentialSpecName" ? ["gmsaCredentialSpec", "gmsaCredentialSpecName"] : [key];
      const containerSetsIt = group.some((k) => !isNil(own[k]));
      return containerSetsIt ? { ...childOf(mine, key), parentPresent: true } : { ...childOf(fromPod, key), note, parentPresent: true };
    },
  };
}

/** Pod-level fields the sketch groups under securityContext but the Pod API keeps in the PodSpec. */
function inPodSpec(field: FieldSpec): FieldSpec {
  return { ...field, locate: (_securityContext, key, ecx) => childOf(ecx.podSpec, key, field.zero) };
}

/** sysctls are a list of {name, value}; they are restricted as a map name → value. */
const sysctls: FieldSpec = {
  ...stringMapField(),
  locate: (securityContext, key) => {
    const list = childOf(securityContext, key);
    if (!Array.isArray(list.value)) return list;
    const map: Record<string, unknown> = {};
    const index = new Map<string, number>();
    list.value.forEach((s, i) => {
      if (!isObject(s)) return;
      // A sysctl without a name is the name "" to Pod Security Admission, which no allowed list holds.
      const name = typeof s.name === "string" ? s.name : "";
      map[name] = s.value;
      index.set(name, i);
    });
    const fieldOf = (name: string) => (index.has(name) ? joinField(`${list.field}[${index.get(name)}]`, "name") : list.field);
    return { value: map, field: list.field, childOf: (name) => ({ value: map[name], field: fieldOf(name) }) };
  },
};

export const podSecurityContext: StructSpec = {
  pointer: false,
  aliases: { hostPid: "hostPID", hostIpc: "hostIPC" },
  fields: {
    hostNetwork: inPodSpec(boolField(false)),
    hostPID: inPodSpec(boolField(false)),
    hostIPC: inPodSpec(boolField(false)),
    shareProcessNamespace: inPodSpec(boolField(true)),
    supplementalGroups: numberListField(),
    fsGroup: numberField(true),
    sysctls,
    runAsUser: numberField(true),
    runAsGroup: numberField(true),
    runAsNonRoot: boolField(true),
    seccompProfile: structField(profileStruct),
    appArmorProfile: structField(profileStruct),
    seLinuxOptions: structField(seLinuxOptions),
    windowsOptions: structField(windowsOptions),
  },
};
