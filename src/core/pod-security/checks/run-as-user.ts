// PSA's runAsUser (check_runAsUser.go): the pod or a container set to run as root (UID 0). From v1.35 pods in a
// user namespace are exempt.
import { field, inEveryContainer, names, setters, type PsaCheck } from "./check-support.ts";

export const runAsUserCheck: PsaCheck = {
  id: "runAsUser",
  level: "restricted",
  versions: ["v1.23", "v1.35"],
  reads: ["spec.securityContext.runAsUser", ...inEveryContainer("securityContext.runAsUser"), "spec.hostUsers"],
  reason: "runAsUser=0",
  detail: (v) => {
    const podBad = field(v.podSecurityContext, "runAsUser") === 0;
    const bad = v.containers.filter((c) => field(c.securityContext, "runAsUser") === 0);
    const who = setters(podBad, names(bad));
    return who.length === 0 ? undefined : { detail: `${who.join(" and ")} must not set runAsUser=0` };
  },
};
