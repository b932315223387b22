// PSA's hostProbesAndHostLifecycle (check_hostProbesAndHostLifecycle.go): probes and lifecycle handlers that name
// a host, which the kubelet would reach on the pod's behalf.
import { containersPhrase, field, inEveryContainer, joinQuote, pluralize, sortedSet, type PsaCheck } from "./check-support.ts";

const HANDLERS = [["livenessProbe"], ["readinessProbe"], ["startupProbe"], ["lifecycle", "postStart"], ["lifecycle", "preStop"]];
const HOST_KINDS = ["httpGet", "tcpSocket"];

export const hostProbesAndHostLifecycleCheck: PsaCheck = {
  id: "hostProbesAndHostLifecycle",
  level: "baseline",
  versions: ["v1.34"],
  reads: inEveryContainer(...HANDLERS.flatMap((handler) => HOST_KINDS.map((kind) => [...handler, kind, "host"].join(".")))),
  reason: "probe or lifecycle host",
  detail: (v) => {
    const bad = new Set<string>();
    const hosts = new Set<string>();
    for (const c of v.containers) {
      for (const handler of HANDLERS) {
        for (const kind of HOST_KINDS) {
          const host = field(c.value, ...handler, kind, "host");
          if (typeof host === "string" && host !== "") {
            bad.add(c.name);
            hosts.add(host);
          }
        }
      }
    }
    if (bad.size === 0) return undefined;
    const containers = sortedSet(bad);
    return {
      detail: `${containersPhrase(containers)} ${pluralize("uses", "use", containers.length)} ${pluralize("probe or lifecycle host", "probe or lifecycle hosts", hosts.size)} ${joinQuote(sortedSet(hosts))}`,
    };
  },
};
