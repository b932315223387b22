// PSA's hostPathVolumes (check_hostPathVolumes.go): volumes that mount a path of the node.
import { isSet, joinQuote, pluralize, volumeName, volumes, type PsaCheck } from "./check-support.ts";

export const hostPathVolumesCheck: PsaCheck = {
  id: "hostPathVolumes",
  level: "baseline",
  versions: ["v1.0"],
  reads: ["spec.volumes[*].hostPath"],
  reason: "hostPath volumes",
  detail: (v) => {
    const vols = volumes(v).filter((vol) => isSet(vol.hostPath));
    return vols.length === 0 ? undefined : { detail: `${pluralize("volume", "volumes", vols.length)} ${joinQuote(vols.map(volumeName))}` };
  },
};
