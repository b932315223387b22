// PSA's hostNamespaces (check_hostNamespaces.go): sharing the host's network, PID or IPC namespace.
import { sortedSet, type PsaCheck } from "./check-support.ts";

const NAMESPACE_FIELDS = ["hostNetwork", "hostPID", "hostIPC"];

export const hostNamespacesCheck: PsaCheck = {
  id: "hostNamespaces",
  level: "baseline",
  versions: ["v1.0"],
  reads: NAMESPACE_FIELDS.map((k) => `spec.${k}`),
  reason: "host namespaces",
  detail: (v) => {
    const used = NAMESPACE_FIELDS.filter((k) => v.spec[k] === true);
    return used.length === 0 ? undefined : { detail: sortedSet(used).join(", ") };
  },
};
