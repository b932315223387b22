// PSA's procMount (check_procMount.go): containers that unmask /proc. From v1.35 pods in a user namespace
// (hostUsers false) are exempt; restricted keeps the unconditional form as procMount_restricted.
import {
  containersPhrase,
  field,
  inEveryContainer,
  isSet,
  joinQuote,
  names,
  sortedSet,
  type CheckWords,
  type PodView,
  type PsaCheck,
} from "./check-support.ts";

export const procMountCheck: PsaCheck = {
  id: "procMount",
  level: "baseline",
  versions: ["v1.0", "v1.35"],
  reads: [...inEveryContainer("securityContext.procMount"), "spec.hostUsers"],
  reason: "procMount",
  detail: (v) => procMountDetail(v),
};

/** Both procMount checks word a pod alike: only which pods they exempt differs. */
export function procMountDetail(v: PodView): CheckWords | undefined {
  const types = new Set<string>();
  const bad = v.containers.filter((c) => {
    const pm = field(c.securityContext, "procMount");
    if (!isSet(pm) || pm === "Default") return false;
    types.add(String(pm));
    return true;
  });
  return bad.length === 0 ? undefined : { detail: `${containersPhrase(names(bad))} must not set securityContext.procMount to ${joinQuote(sortedSet(types))}` };
}
