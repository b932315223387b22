// PSA's capabilities_baseline (check_capabilities_baseline.go): capabilities added beyond the container runtime's
// defaults.
import { containersPhrase, field, inEveryContainer, joinQuote, names, sortedSet, stringList, type PsaCheck } from "./check-support.ts";

const DEFAULT_CAPABILITIES = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

export const capabilitiesBaselineCheck: PsaCheck = {
  id: "capabilities_baseline",
  level: "baseline",
  versions: ["v1.0"],
  reads: inEveryContainer("securityContext.capabilities.add"),
  reason: "non-default capabilities",
  detail: (v) => {
    const caps = new Set<string>();
    const bad = v.containers.filter((c) => {
      const added = stringList(field(c.securityContext, "capabilities", "add")).filter((cap) => !DEFAULT_CAPABILITIES.has(cap));
      added.forEach((cap) => caps.add(cap));
      return added.length > 0;
    });
    if (bad.length === 0) return undefined;
    return { detail: `${containersPhrase(names(bad))} must not include ${joinQuote(sortedSet(caps))} in securityContext.capabilities.add` };
  },
};
