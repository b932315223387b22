// PSA's allowPrivilegeEscalation (check_allowPrivilegeEscalation.go): containers that do not forbid privilege
// escalation. From v1.25 Windows pods are exempt.
import { containersPhrase, field, inEveryContainer, names, type PsaCheck } from "./check-support.ts";

export const allowPrivilegeEscalationCheck: PsaCheck = {
  id: "allowPrivilegeEscalation",
  level: "restricted",
  versions: ["v1.8", "v1.25"],
  reads: [...inEveryContainer("securityContext.allowPrivilegeEscalation"), "spec.os.name"],
  reason: "allowPrivilegeEscalation != false",
  detail: (v) => {
    const bad = v.containers.filter((c) => field(c.securityContext, "allowPrivilegeEscalation") !== false);
    return bad.length === 0 ? undefined : { detail: `${containersPhrase(names(bad))} must set securityContext.allowPrivilegeEscalation=false` };
  },
};
