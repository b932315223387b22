// PSA's capabilities_restricted (check_capabilities_restricted.go): containers must drop ALL capabilities and may
// add back only NET_BIND_SERVICE. From v1.25 Windows pods are exempt.
import { containersPhrase, field, inEveryContainer, isSet, joinQuote, sortedSet, stringList, type PsaCheck } from "./check-support.ts";

export const capabilitiesRestrictedCheck: PsaCheck = {
  id: "capabilities_restricted",
  level: "restricted",
  versions: ["v1.22", "v1.25"],
  reads: [...inEveryContainer("securityContext.capabilities.drop", "securityContext.capabilities.add"), "spec.os.name"],
  reason: "unrestricted capabilities",
  detail: (v) => {
    const missingDropAll: string[] = [];
    const adding: string[] = [];
    const caps = new Set<string>();
    for (const c of v.containers) {
      const capabilities = field(c.securityContext, "capabilities");
      if (!isSet(capabilities)) {
        missingDropAll.push(c.name);
        continue;
      }
      if (!stringList(field(c.securityContext, "capabilities", "drop")).includes("ALL")) missingDropAll.push(c.name);
      const added = stringList(field(c.securityContext, "capabilities", "add")).filter((cap) => cap !== "NET_BIND_SERVICE");
      added.forEach((cap) => caps.add(cap));
      if (added.length > 0) adding.push(c.name);
    }
    const details: string[] = [];
    if (missingDropAll.length > 0) details.push(`${containersPhrase(missingDropAll)} must set securityContext.capabilities.drop=["ALL"]`);
    if (adding.length > 0) details.push(`${containersPhrase(adding)} must not include ${joinQuote(sortedSet(caps))} in securityContext.capabilities.add`);
    return details.length === 0 ? undefined : { detail: details.join("; ") };
  },
};
