// PSA's hostPorts (check_hostPorts.go): container ports bound on the node.
import { isObject } from "../../primitives/json-shapes.ts";
import { containersPhrase, inEveryContainer, names, pluralize, sortedSet, type PsaCheck } from "./check-support.ts";

export const hostPortsCheck: PsaCheck = {
  id: "hostPorts",
  level: "baseline",
  versions: ["v1.0"],
  reads: inEveryContainer("ports[*].hostPort"),
  reason: "hostPort",
  detail: (v) => {
    const ports = new Set<string>();
    const bad = v.containers.filter((c) => {
      let found = false;
      for (const p of Array.isArray(c.value.ports) ? c.value.ports : []) {
        const hostPort = isObject(p) ? p.hostPort : undefined;
        if (typeof hostPort === "number" && hostPort !== 0) {
          ports.add(String(hostPort));
          found = true;
        }
      }
      return found;
    });
    if (bad.length === 0) return undefined;
    const list = sortedSet(ports);
    return {
      detail: `${containersPhrase(names(bad))} ${pluralize("uses", "use", bad.length)} ${pluralize("hostPort", "hostPorts", list.length)} ${list.join(", ")}`,
    };
  },
};
