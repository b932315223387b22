// PSA's runAsNonRoot (check_runAsNonRoot.go): every container must run as non-root, by its own setting or the
// pod's. From v1.35 pods in a user namespace are exempt.
import { containersPhrase, field, inEveryContainer, isSet, setters, type PsaCheck } from "./check-support.ts";

export const runAsNonRootCheck: PsaCheck = {
  id: "runAsNonRoot",
  level: "restricted",
  versions: ["v1.0", "v1.35"],
  reads: ["spec.securityContext.runAsNonRoot", ...inEveryContainer("securityContext.runAsNonRoot"), "spec.hostUsers"],
  reason: "runAsNonRoot != true",
  detail: (v) => {
    const podValue = field(v.podSecurityContext, "runAsNonRoot");
    // Containers that say false are named apart from those that leave it to a pod that does not say true.
    const explicit: string[] = [];
    const implicit: string[] = [];
    for (const c of v.containers) {
      const own = field(c.securityContext, "runAsNonRoot");
      if (isSet(own)) {
        if (own === false) explicit.push(c.name);
      } else if (podValue !== true) implicit.push(c.name);
    }
    const who = setters(podValue === false, explicit);
    if (who.length > 0) return { detail: `${who.join(" and ")} must not set securityContext.runAsNonRoot=false` };
    if (implicit.length > 0) return { detail: `pod or ${containersPhrase(implicit)} must set securityContext.runAsNonRoot=true` };
    return undefined;
  },
};
