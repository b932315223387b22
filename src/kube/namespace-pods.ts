// The pods of one namespace, for Pod Security Admission's namespace check (a tightened enforce level warns about the
// pods already there). Listed through the API, at most the check's limit, bounded in time; a list that fails is
// "unknown" (undefined), which the check words as PSA does, never an error of the request.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { withSignal } from "./api-requests.ts";

/** How long the namespace check waits for the list of the namespace's pods. */
const NAMESPACE_POD_LIST_TIMEOUT_MS = 5_000;

export interface NamespacePods {
  /** Up to `limit` pods of `namespace` as plain JSON, or undefined when they cannot be listed by `deadline`. */
  list(namespace: string, limit: number, deadline: number): Promise<Record<string, unknown>[] | undefined>;
}

export class KubeNamespacePods implements NamespacePods {
  private readonly kube: KubeConfig;
  private readonly logger: Logger;
  /** Made on first use: only the namespace check lists pods. */
  private api: CoreV1Api | undefined;

  constructor(kube: KubeConfig, logger: Logger) {
    this.kube = kube;
    this.logger = logger;
  }

  async list(namespace: string, limit: number, deadline: number): Promise<Record<string, unknown>[] | undefined> {
    try {
      const api = (this.api ??= this.kube.makeApiClient(CoreV1Api));
      const signal = AbortSignal.timeout(Math.max(1, Math.min(deadline - Date.now(), NAMESPACE_POD_LIST_TIMEOUT_MS)));
      const list = await api.listNamespacedPod({ namespace, limit }, withSignal(signal));
      return list.items.map((p) => JSON.parse(JSON.stringify(p)) as Record<string, unknown>);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, namespace }, "pod security: cannot list the namespace's pods");
      return undefined;
    }
  }
}
