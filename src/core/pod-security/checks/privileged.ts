// PSA's privileged (check_privileged.go): privileged containers.
import { containersPhrase, field, inEveryContainer, names, type PsaCheck } from "./check-support.ts";

export const privilegedCheck: PsaCheck = {
  id: "privileged",
  level: "baseline",
  versions: ["v1.0"],
  reads: inEveryContainer("securityContext.privileged"),
  reason: "privileged",
  detail: (v) => {
    const bad = v.containers.filter((c) => field(c.securityContext, "privileged") === true);
    return bad.length === 0 ? undefined : { detail: `${containersPhrase(names(bad))} must not set securityContext.privileged=true` };
  },
};
