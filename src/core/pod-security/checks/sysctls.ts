// PSA's sysctls (check_sysctls.go): sysctls outside the safe, namespaced set.
import { isObject } from "../../primitives/json-shapes.ts";
import { field, type PsaCheck } from "./check-support.ts";

export const sysctlsCheck: PsaCheck = {
  id: "sysctls",
  level: "baseline",
  versions: ["v1.0", "v1.27", "v1.29", "v1.32", "v1.37"],
  reads: ["spec.securityContext.sysctls[*].name"],
  reason: "forbidden sysctls",
  // The allowed sysctls changed with the policy version: the forbidden ones are the findings', in pod order.
  detail: (v, found) => {
    const sysctls = field(v.podSecurityContext, "sysctls");
    const indexes = [...new Set(found.flatMap((l) => (l.at === "sysctl" ? [l.index] : [])))].sort((a, b) => a - b);
    const list = indexes.map((i) => String(field(Array.isArray(sysctls) && isObject(sysctls[i]) ? sysctls[i] : undefined, "name") ?? ""));
    return list.length === 0 ? undefined : { detail: list.join(", ") };
  },
};
