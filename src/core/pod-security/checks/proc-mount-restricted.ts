// PSA's procMount_restricted (check_procMount.go): from v1.35, when baseline's procMount exempts pods in a user
// namespace, restricted keeps the default /proc masks required for every pod. Worded as procMount.
import { inEveryContainer, type PsaCheck } from "./check-support.ts";
import { procMountDetail } from "./proc-mount.ts";

export const procMountRestrictedCheck: PsaCheck = {
  id: "procMount_restricted",
  level: "restricted",
  versions: ["v1.35"],
  reads: inEveryContainer("securityContext.procMount"),
  reason: "procMount",
  detail: (v) => procMountDetail(v),
};
