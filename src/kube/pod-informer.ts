// Every pod of the cluster (or of one namespace, or matching a label selector), kept current from the Kubernetes
// API for the background audit: a paged list, then a watch from the list's resource version with bookmarks; a
// watch that ends is resumed, one the server refuses with 410 Gone lists again (ListWatch). Each change is
// handed on as an event; a list hands on the whole set, so that pods deleted while no watch ran are seen gone.
import type { Logger } from "pino";
import { asObject } from "../core/primitives/json-shapes.ts";
import { KubeApiError } from "./api-requests.ts";
import type { KubeClient, QueryValue } from "./kube-client.ts";
import { ListWatch, type ListPage } from "./list-watch-loop.ts";

/** A pod as the API serialises it (plain JSON: what policies and CEL see at admission). */
export type PodObject = Record<string, unknown> & { metadata?: { uid?: string; name?: string; namespace?: string; resourceVersion?: string } };

export interface PodEvents<Kept> {
  /** A pod created or changed. */
  upsert(pod: PodObject): void;
  /** A pod deleted. */
  remove(pod: PodObject): void;
  /**
   * What is kept of each listed pod until the list is complete, made as its page arrives (the pod itself, or less:
   * the background scan keeps its JSON text, so a list of 5,000 pods never holds 5,000 parsed pods at once).
   */
  keep(pod: PodObject): Kept;
  /** After each complete list: what was kept of every pod that exists now (the ones not in it are gone). */
  listed(pods: readonly Kept[]): void;
  /** A watch or list failed and is retried (metrics count restarts). */
  restarted?(err: unknown): void;
}

export interface PodInformerOptions {
  logger: Logger;
  namespace?: string;
  labelSelector?: string;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Page size of lists (default 500). */
  pageSize?: number;
}

const LIST_TIMEOUT_MS = 60_000;

export class PodInformer<Kept = PodObject> {
  private readonly kube: KubeClient;
  private readonly lifetime = new AbortController();
  private readonly listWatch: ListWatch;
  private readonly events: PodEvents<Kept>;
  private readonly opts: PodInformerOptions;

  constructor(kube: KubeClient, events: PodEvents<Kept>, opts: PodInformerOptions) {
    this.events = events;
    this.opts = opts;
    this.kube = kube;
    this.listWatch = new ListWatch(
      kube,
      {
        what: "pods",
        logFields: {
          ...(opts.namespace ? { namespace: opts.namespace } : {}),
          ...(opts.labelSelector ? { selector: opts.labelSelector } : {}),
        },
        log: opts.logger,
        minBackoffMs: opts.minBackoffMs ?? 500,
        maxBackoffMs: opts.maxBackoffMs ?? 30_000,
        path: podsPath(opts.namespace),
        ...(opts.labelSelector ? { watchQuery: { labelSelector: opts.labelSelector } } : {}),
        listPage: (continueToken) => this.listPage(continueToken),
      },
      {
        keep: (pod) => this.events.keep(pod as PodObject),
        replaceAll: (pods) => this.events.listed(pods as Kept[]),
        apply: (type, object) => (type === "DELETED" ? this.events.remove(object as PodObject) : this.events.upsert(object as PodObject)),
        failed: (err) => this.events.restarted?.(err),
      },
    );
  }

  /** Starts listing and watching in the background; never rejects (failures are logged and retried). */
  start(): void {
    this.listWatch.start();
  }

  async close(): Promise<void> {
    this.lifetime.abort(new Error("pod informer closed"));
    await this.listWatch.close();
  }

  /** What is kept of every pod, page by page (the list is consistent: later pages come from the first page's snapshot). */
  async list(): Promise<Kept[]> {
    return (await this.listWatch.list()) as Kept[];
  }

  /** One page: the pods as the API serialises them, which is what policies and CEL see at admission. */
  private async listPage(continueToken: string | undefined): Promise<ListPage> {
    const path = podsPath(this.opts.namespace);
    const query: Record<string, QueryValue> = {
      limit: this.opts.pageSize ?? 500,
      ...(continueToken ? { continue: continueToken } : {}),
      ...(this.opts.labelSelector ? { labelSelector: this.opts.labelSelector } : {}),
    };
    const signal = AbortSignal.any([this.lifetime.signal, AbortSignal.timeout(LIST_TIMEOUT_MS)]);
    let page: unknown;
    try {
      page = await this.kube.read(path, { query, signal });
    } catch (e) {
      if (signal.aborted && !this.lifetime.signal.aborted)
        throw new KubeApiError("timeout", `listing pods timed out after ${LIST_TIMEOUT_MS / 1000} s`, { cause: e });
      throw e;
    }
    const list = asObject(page);
    const metadata = asObject(list?.metadata);
    if (!list || !Array.isArray(list.items)) throw new KubeApiError("unavailable", `GET ${path}: the answer is not a list of pods`);
    return {
      // List items carry no apiVersion and kind; a pod judged as an object needs them, as watch events have them.
      items: list.items.map((item) => ({ apiVersion: "v1", kind: "Pod", ...(asObject(item) ?? {}) })),
      resourceVersion: typeof metadata?.resourceVersion === "string" ? metadata.resourceVersion : "",
      continueToken: typeof metadata?.continue === "string" && metadata.continue !== "" ? metadata.continue : undefined,
    };
  }
}

/** Where the pods of `namespace` (of every namespace, without one) are listed and watched. */
function podsPath(namespace: string | undefined): string {
  return namespace ? `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods` : "/api/v1/pods";
}
