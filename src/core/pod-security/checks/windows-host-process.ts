// PSA's windowsHostProcess (check_windowsHostProcess.go): Windows HostProcess pods and containers.
import { field, inEveryContainer, setters, names, type PsaCheck } from "./check-support.ts";

export const windowsHostProcessCheck: PsaCheck = {
  id: "windowsHostProcess",
  level: "baseline",
  versions: ["v1.0"],
  reads: ["spec.securityContext.windowsOptions.hostProcess", ...inEveryContainer("securityContext.windowsOptions.hostProcess")],
  reason: "hostProcess",
  detail: (v) => {
    const podBad = field(v.podSecurityContext, "windowsOptions", "hostProcess") === true;
    const bad = v.containers.filter((c) => field(c.securityContext, "windowsOptions", "hostProcess") === true);
    const who = setters(podBad, names(bad));
    return who.length === 0 ? undefined : { detail: `${who.join(" and ")} must not set securityContext.windowsOptions.hostProcess=true` };
  },
};
