// PSA's seccompProfile_baseline (check_seccompProfile_baseline.go): a seccomp profile that is set must be
// RuntimeDefault or Localhost; before v1.19 the check read the seccomp annotations instead of the fields.
import { goQuote } from "../psa-labels.ts";
import { field, inEveryContainer, isSet, joinQuote, names, pluralize, setters, sortedSet, type PsaCheck } from "./check-support.ts";

/** The seccomp profile types both seccomp checks allow. */
export const ALLOWED_SECCOMP_TYPES = new Set(["RuntimeDefault", "Localhost"]);

export const seccompProfileBaselineCheck: PsaCheck = {
  id: "seccompProfile_baseline",
  level: "baseline",
  versions: ["v1.0", "v1.19"],
  reads: [
    "metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]",
    "metadata.annotations[container.seccomp.security.alpha.kubernetes.io/*]",
    "spec.securityContext.seccompProfile.type",
    ...inEveryContainer("securityContext.seccompProfile.type"),
  ],
  reason: "seccompProfile",
  detail: (v, found) => {
    // Findings on annotations come from the versions before v1.19, which read only the annotations.
    if (found.some((l) => l.at === "annotation")) {
      const forbidden = sortedSet(
        found.flatMap((l) => (l.at === "annotation" ? [`${l.key}=${goQuote(String(field(v.metadata, "annotations", l.key) ?? ""))}`] : [])),
      );
      return { detail: `forbidden ${pluralize("annotation", "annotations", forbidden.length)} ${forbidden.join(", ")}` };
    }
    const values = new Set<string>();
    const podProfile = field(v.podSecurityContext, "seccompProfile");
    const podType = String(field(v.podSecurityContext, "seccompProfile", "type") ?? "");
    const podBad = isSet(podProfile) && !ALLOWED_SECCOMP_TYPES.has(podType);
    if (podBad) values.add(podType);
    const bad = v.containers.filter((c) => {
      if (!isSet(field(c.securityContext, "seccompProfile"))) return false;
      const t = String(field(c.securityContext, "seccompProfile", "type") ?? "");
      if (ALLOWED_SECCOMP_TYPES.has(t)) return false;
      values.add(t);
      return true;
    });
    const who = setters(podBad, names(bad));
    if (who.length === 0) return undefined;
    return { detail: `${who.join(" and ")} must not set securityContext.seccompProfile.type to ${joinQuote(sortedSet(values))}` };
  },
};
