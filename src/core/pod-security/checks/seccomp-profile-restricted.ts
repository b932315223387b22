// PSA's seccompProfile_restricted (check_seccompProfile_restricted.go): every container must run under a
// RuntimeDefault or Localhost seccomp profile, its own or the pod's. From v1.25 Windows pods are exempt.
import { containersPhrase, field, inEveryContainer, isSet, joinQuote, setters, sortedSet, type PsaCheck } from "./check-support.ts";
import { ALLOWED_SECCOMP_TYPES } from "./seccomp-profile-baseline.ts";

export const seccompProfileRestrictedCheck: PsaCheck = {
  id: "seccompProfile_restricted",
  level: "restricted",
  versions: ["v1.19", "v1.25"],
  reads: ["spec.securityContext.seccompProfile.type", ...inEveryContainer("securityContext.seccompProfile.type"), "spec.os.name"],
  reason: "seccompProfile",
  detail: (v) => {
    const values = new Set<string>();
    const podProfile = field(v.podSecurityContext, "seccompProfile");
    const podType = String(field(v.podSecurityContext, "seccompProfile", "type") ?? "");
    const podBad = isSet(podProfile) && !ALLOWED_SECCOMP_TYPES.has(podType);
    if (podBad) values.add(podType);
    const podSet = isSet(podProfile) && !podBad;
    // Containers with a bad profile of their own are named apart from those that have none and no good pod one.
    const explicit: string[] = [];
    const implicit: string[] = [];
    for (const c of v.containers) {
      if (isSet(field(c.securityContext, "seccompProfile"))) {
        const t = String(field(c.securityContext, "seccompProfile", "type") ?? "");
        if (!ALLOWED_SECCOMP_TYPES.has(t)) {
          explicit.push(c.name);
          values.add(t);
        }
      } else if (!podSet) implicit.push(c.name);
    }
    const who = setters(podBad, explicit);
    if (who.length > 0) return { detail: `${who.join(" and ")} must not set securityContext.seccompProfile.type to ${joinQuote(sortedSet(values))}` };
    if (implicit.length > 0)
      return { detail: `pod or ${containersPhrase(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"` };
    return undefined;
  },
};
