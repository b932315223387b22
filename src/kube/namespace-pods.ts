// The pods of one namespace, for Pod Security Admission's namespace check (a tightened enforce level warns about the
// pods already there). Listed through the API, at most the check's limit, bounded in time; a list that fails is
// "unknown" (undefined), which the check words as PSA does, never an error of the request.
import type { Logger } from "pino";
import { asObject, isObject } from "../core/primitives/json-shapes.ts";
import { KubeApiError } from "./api-requests.ts";
import type { KubeClient } from "./kube-client.ts";

/** How long the namespace check waits for the list of the namespace's pods. */
const NAMESPACE_POD_LIST_TIMEOUT_MS = 5_000;

export interface NamespacePods {
  /** Up to `limit` pods of `namespace` as plain JSON, or undefined when they cannot be listed by `deadline`. */
  list(namespace: string, limit: number, deadline: number): Promise<Record<string, unknown>[] | undefined>;
}

export class KubeNamespacePods implements NamespacePods {
  private readonly kube: KubeClient;
  private readonly logger: Logger;

  constructor(kube: KubeClient, logger: Logger) {
    this.kube = kube;
    this.logger = logger;
  }

  async list(namespace: string, limit: number, deadline: number): Promise<Record<string, unknown>[] | undefined> {
    try {
      const signal = AbortSignal.timeout(Math.max(1, Math.min(deadline - Date.now(), NAMESPACE_POD_LIST_TIMEOUT_MS)));
      const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
      const items = asObject(await this.kube.request("GET", path, { query: { limit }, signal }))?.items;
      if (!Array.isArray(items)) throw new KubeApiError("unavailable", `GET ${path}: the answer is not a list of pods`);
      return items.filter(isObject);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, namespace }, "pod security: cannot list the namespace's pods");
      return undefined;
    }
  }
}
