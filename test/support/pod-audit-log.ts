// The apiserver's audit log of pod requests, for tests that read back what admission left on a pod's creation (the
// webhooks' audit annotations): a policy that logs pods at Metadata level and nothing else, the kube-apiserver flags
// that write it (blocking: an event is in the file by the time the request returns), and the events read back.
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { stringify } from "yaml";

export interface PodAuditEvent {
  objectRef?: { resource?: string; name?: string; namespace?: string };
  verb?: string;
  stage?: string;
  annotations?: Record<string, string>;
}

export interface PodAuditLog {
  /** For startKubeCluster's extraArgs. */
  apiserverArgs: string[];
  /** The completed creations of pod `name` in `namespace`, oldest first. */
  podCreations(name: string, namespace: string): Promise<PodAuditEvent[]>;
}

/** Writes the audit policy into `dir`; the log is `dir`/`logName`. */
export async function podAuditLog(dir: string, logName = "audit.log"): Promise<PodAuditLog> {
  const policy = join(dir, "audit-policy.yaml");
  const path = join(dir, logName);
  await writeFile(
    policy,
    stringify({
      apiVersion: "audit.k8s.io/v1",
      kind: "Policy",
      omitStages: ["RequestReceived"],
      rules: [{ level: "Metadata", resources: [{ group: "", resources: ["pods"] }] }, { level: "None" }],
    }),
  );
  return {
    apiserverArgs: [`--audit-policy-file=${policy}`, `--audit-log-path=${path}`, "--audit-log-mode=blocking"],
    async podCreations(name, namespace) {
      const events = (await readFile(path, "utf8"))
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as PodAuditEvent);
      return events.filter(
        (e) =>
          e.objectRef?.resource === "pods" &&
          e.objectRef?.name === name &&
          e.objectRef?.namespace === namespace &&
          e.verb === "create" &&
          e.stage === "ResponseComplete",
      );
    },
  };
}
