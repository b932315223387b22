// Prometheus metrics of the node proxy, in the meaning of the kubelet's image-manager metrics
// (kubelet_imagemanager_*) under the project's prefix, plus what the kubelet does not count: the outcome of
// every check, pulls answered from records, and reuses the registry refused.
import { Counter, Gauge, Registry } from "prom-client";
import type { RecordStore } from "./record-store.ts";

/** How one ImageStatus of the kubelet's pull decision was answered. */
export type ImageCheckResult =
  /** Not a pod's pull decision (no kubelet annotations): answered truthfully. */
  | "not-a-pod"
  /** The runtime has no such image. */
  | "absent"
  /** The verification policy does not ask for credentials (NeverVerify, preloaded, allowlisted). */
  | "policy-skip"
  /** Pulled anonymously: every pod may use it. */
  | "all-pods"
  /** This pod already showed credentials recorded for the image. */
  | "pod-verified"
  /** The pod's pull secrets (read from the API) hold a credential recorded for the image. */
  | "pod-secrets"
  /** Reported absent so the kubelet pulls with the pod's credentials. */
  | "must-pull"
  /** The record could not be read: reported absent (fail safe). */
  | "unreadable-record"
  /** Pulls are verified and this pod has not had the image verified under the policies in force: reported absent. */
  | "not-verified";

export type PullResult = "answered-from-records" | "forwarded-ok" | "forwarded-failed";

export interface NodeMetrics {
  registry: Registry;
  imageCheck(result: ImageCheckResult): void;
  pull(result: PullResult): void;
  reuseDenied(): void;
  /** A pull judged at the node (verification at pull time). */
  pullVerdict(outcome: "verified" | "failed-open" | "refused"): void;
  criCall(method: string, code: string): void;
}

export function createNodeMetrics(store: () => RecordStore | undefined): NodeMetrics {
  const registry = new Registry();
  const checks = new Counter({
    name: "imprimatur_node_image_checks_total",
    help: "ImageStatus calls of the kubelet's pull decision, by how they were answered",
    labelNames: ["result"],
    registers: [registry],
  });
  const pulls = new Counter({ name: "imprimatur_node_pulls_total", help: "PullImage calls, by outcome", labelNames: ["result"], registers: [registry] });
  const denied = new Counter({
    name: "imprimatur_node_reuse_denied_total",
    help: "Pods refused an image already on the node because the registry refused their credentials",
    registers: [registry],
  });
  const verdicts = new Counter({
    name: "imprimatur_node_pull_verifications_total",
    help: "Pulls judged by the policies at the node, by outcome (verified, failed-open, refused)",
    labelNames: ["outcome"],
    registers: [registry],
  });
  const calls = new Counter({
    name: "imprimatur_node_cri_calls_total",
    help: "CRI image-service calls, by method and gRPC code",
    labelNames: ["method", "code"],
    registers: [registry],
  });
  new Gauge({
    name: "imprimatur_node_pulled_records",
    help: "Pulled records in memory (each also on disk), by whether they could be read",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const c = store()?.counts();
      this.set({ state: "readable" }, c?.pulled ?? 0);
      this.set({ state: "unreadable" }, c?.unreadable ?? 0);
    },
  });
  new Gauge({
    name: "imprimatur_node_pull_intents",
    help: "Pulls in flight (an intent written, the pull not finished)",
    registers: [registry],
    collect() {
      this.set(store()?.counts().intentsInFlight ?? 0);
    },
  });
  return {
    registry,
    imageCheck: (result) => checks.inc({ result }),
    pull: (result) => pulls.inc({ result }),
    reuseDenied: () => denied.inc(),
    pullVerdict: (outcome) => verdicts.inc({ outcome }),
    criCall: (method, code) => calls.inc({ method, code }),
  };
}
