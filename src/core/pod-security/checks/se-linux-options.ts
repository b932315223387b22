// PSA's seLinuxOptions (check_seLinuxOptions.go): SELinux users, roles and types other than the container ones.
import { isObject } from "../../primitives/json-shapes.ts";
import { field, inEveryContainer, joinQuote, pluralize, setters, sortedSet, type ContainerView, type PsaCheck } from "./check-support.ts";

const OPTIONS = ["type", "user", "role"];

export const seLinuxOptionsCheck: PsaCheck = {
  id: "seLinuxOptions",
  level: "baseline",
  versions: ["v1.0", "v1.31"],
  reads: [...OPTIONS.map((o) => `spec.securityContext.seLinuxOptions.${o}`), ...inEveryContainer(...OPTIONS.map((o) => `securityContext.seLinuxOptions.${o}`))],
  reason: "seLinuxOptions",
  // The allowed types changed with the policy version: the bad values are the findings'.
  detail: (v, found) => {
    const types = new Set<string>();
    let user = false;
    let role = false;
    let podBad = false;
    const bad = new Set<ContainerView>();
    for (const l of found) {
      const rest = l.at === "pod" || l.at === "container" ? l.rest : "";
      const m = /^(?:securityContext\.)?seLinuxOptions(?:\.(type|user|role))?$/.exec(rest);
      if (!m) continue;
      if (l.at === "pod") podBad = true;
      else if (l.at === "container" && l.container) bad.add(l.container);
      const opts = l.at === "container" ? field(l.container?.securityContext, "seLinuxOptions") : field(v.podSecurityContext, "seLinuxOptions");
      if (m[1] === "type") types.add(String(field(isObject(opts) ? opts : undefined, "type") ?? ""));
      if (m[1] === "user") user = true;
      if (m[1] === "role") role = true;
    }
    const who = setters(
      podBad,
      v.containers.filter((c) => bad.has(c)).map((c) => c.name),
    );
    if (who.length === 0) return undefined;
    const data: string[] = [];
    if (types.size > 0) data.push(`${pluralize("type", "types", types.size)} ${joinQuote(sortedSet(types))}`);
    if (user) data.push("user may not be set");
    if (role) data.push("role may not be set");
    return { detail: `${who.join(" and ")} set forbidden securityContext.seLinuxOptions: ${data.join("; ")}` };
  },
};
