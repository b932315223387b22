// PSA's appArmorProfile (check_appArmorProfile.go): the pod's and containers' AppArmor profile types, and the
// beta annotations that set them before the fields existed.
import { isObject } from "../../primitives/json-shapes.ts";
import { goQuote } from "../psa-labels.ts";
import { byteOrder, field, inEveryContainer, isSet, joinQuote, names, pluralize, setters, sortedSet, type PsaCheck } from "./check-support.ts";

const ALLOWED_TYPES = new Set(["RuntimeDefault", "Localhost"]);
const ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/";

export const appArmorProfileCheck: PsaCheck = {
  id: "appArmorProfile",
  level: "baseline",
  versions: ["v1.0"],
  reads: [
    `metadata.annotations[${ANNOTATION_PREFIX}*]`,
    "spec.securityContext.appArmorProfile.type",
    ...inEveryContainer("securityContext.appArmorProfile.type"),
  ],
  reason: "forbidden AppArmor profile",
  detail: (v) => {
    const badValues = new Set<string>();
    const podType = field(v.podSecurityContext, "appArmorProfile", "type");
    const podBad = isSet(field(v.podSecurityContext, "appArmorProfile")) && !ALLOWED_TYPES.has(String(podType ?? ""));
    if (podBad) badValues.add(String(podType ?? ""));
    const bad = v.containers.filter((c) => {
      if (!isSet(field(c.securityContext, "appArmorProfile"))) return false;
      const t = String(field(c.securityContext, "appArmorProfile", "type") ?? "");
      if (ALLOWED_TYPES.has(t)) return false;
      badValues.add(t);
      return true;
    });
    const who = setters(podBad, names(bad));
    const annotations: string[] = [];
    const meta = isObject(v.metadata.annotations) ? v.metadata.annotations : {};
    for (const [k, value] of Object.entries(meta)) {
      const text = String(value);
      if (k.startsWith(ANNOTATION_PREFIX) && !(text === "" || text === "runtime/default" || text.startsWith("localhost/")))
        annotations.push(`${k}=${goQuote(text)}`);
    }
    const values = sortedSet(badValues);
    if (annotations.length > 0) {
      values.push(...annotations.sort(byteOrder));
      who.push(pluralize("annotation", "annotations", annotations.length));
    }
    if (who.length === 0) return undefined;
    return {
      reason: pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", values.length),
      detail: `${who.join(" and ")} must not set AppArmor profile type to ${joinQuote(values)}`,
    };
  },
};
