// PSA's restrictedVolumes (check_restrictedVolumes.go): volume types other than the ones that do not reach the
// host. Which volumes are bad is the findings'; PSA names the type of each.
import { joinQuote, pluralize, sortedSet, volumeName, volumes, type PsaCheck } from "./check-support.ts";

// The volume types PSA names; any other forbidden source is "unknown".
const NAMED_VOLUME_TYPES = new Set([
  "hostPath",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "gitRepo",
  "nfs",
  "iscsi",
  "glusterfs",
  "rbd",
  "flexVolume",
  "cinder",
  "cephfs",
  "flocker",
  "fc",
  "azureFile",
  "vsphereVolume",
  "quobyte",
  "azureDisk",
  "photonPersistentDisk",
  "portworxVolume",
  "scaleIO",
  "storageos",
]);

export const restrictedVolumesCheck: PsaCheck = {
  id: "restrictedVolumes",
  level: "restricted",
  versions: ["v1.0"],
  reads: ["spec.volumes[*]"],
  reason: "restricted volume types",
  detail: (v, found) => {
    const all = volumes(v);
    const indexes = [...new Set(found.flatMap((l) => (l.at === "volume" ? [l.index] : [])))].sort((a, b) => a - b);
    if (indexes.length === 0) return undefined;
    const types = new Set<string>();
    for (const l of found) if (l.at === "volume") types.add(NAMED_VOLUME_TYPES.has(l.rest) ? l.rest : "unknown");
    const vols = indexes.map((i) => volumeName(all[i]));
    const typeList = sortedSet(types);
    return {
      detail: `${pluralize("volume", "volumes", vols.length)} ${joinQuote(vols)} ${pluralize("uses", "use", vols.length)} ${pluralize("restricted volume type", "restricted volume types", typeList.length)} ${joinQuote(typeList)}`,
    };
  },
};
