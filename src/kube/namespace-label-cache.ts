// Namespace labels kept current from the Kubernetes API: list /api/v1/namespaces once, then watch it,
// re-watching (and re-listing when the server has forgotten our resource version) for as long as the
// process runs. A cache miss can be filled on demand with one GET (prepare).
//
// Kept by the project's one list-then-watch (ListWatch, list-watch-loop.ts): every failure is retried, bounded and
// logged, and every list has a timeout.
import { ListWatch, type ListPage } from "./list-watch-loop.ts";
import { describeApiError, KubeApiError, kubeApiErrorCode } from "./api-requests.ts";
import type { KubeClient } from "./kube-client.ts";
import { KubeError } from "./kube-error.ts";
import type { Logger } from "pino";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import { asObject, stringMap } from "../core/primitives/json-shapes.ts";

export interface NamespaceLabelCacheOptions {
  logger: Logger;
  /** How long start() waits for the first complete list before giving up. Default 10 s. */
  startTimeoutMs?: number;
  /** Restart delay after the first failure, doubled after each further one up to maxBackoffMs. Default 200 ms. */
  minBackoffMs?: number;
  /** Default 10 s. */
  maxBackoffMs?: number;
  /** How long a 404 from prepare() stops further GETs for that name. Default 1 s. */
  notFoundTtlMs?: number;
}

type Labels = Readonly<Record<string, string>>;

/** A Namespace as far as its labels go. */
interface NamespaceObject {
  metadata?: { name?: string; labels?: Record<string, string> };
}

interface PendingGet {
  done: Promise<void>;
  abort: AbortController;
  /** When the GET is abandoned: the latest deadline among the callers waiting for it. */
  deadline: number;
  timer: NodeJS.Timeout | undefined;
  /** A watch event or list for this name arrived meanwhile, so the GET's answer may be older. */
  superseded: boolean;
}

const NAMESPACES_PATH = "/api/v1/namespaces";
const LIST_PAGE_SIZE = 500;
const LIST_TIMEOUT_MS = 30_000;
// prepare() never holds a GET open longer than this, whatever deadline it is given.
const MAX_GET_MS = 10_000;

export class NamespaceLabelCache implements NamespaceLabelSource {
  private readonly log: Logger;
  private readonly server: string;
  private readonly kube: KubeClient;
  private readonly listWatch: ListWatch;
  private readonly startTimeoutMs: number;
  private readonly notFoundTtlMs: number;

  private readonly table = new Map<string, Labels>();
  private readonly notFoundUntil = new Map<string, number>();
  private readonly pending = new Map<string, PendingGet>();
  /** Aborted by close(): ends sleeps, lists and GETs. */
  private readonly lifetime = new AbortController();
  private readonly firstSync = Promise.withResolvers<void>();

  private listed = false;
  private closed = false;
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  private lastError: unknown;

  constructor(kubeConfig: KubeClient, options: NamespaceLabelCacheOptions) {
    this.log = options.logger;
    this.server = kubeConfig.connection.server;
    this.kube = kubeConfig;
    this.startTimeoutMs = options.startTimeoutMs ?? 10_000;
    this.notFoundTtlMs = options.notFoundTtlMs ?? 1_000;
    this.listWatch = new ListWatch(
      kubeConfig,
      {
        what: "namespace labels",
        logFields: { server: this.server },
        log: this.log,
        minBackoffMs: options.minBackoffMs ?? 200,
        maxBackoffMs: options.maxBackoffMs ?? 10_000,
        path: NAMESPACES_PATH,
        listPage: (continueToken) => this.listPage(continueToken),
      },
      {
        replaceAll: (items) => this.replaceAll(items as NamespaceObject[]),
        apply: (type, object) => this.apply(type, object as NamespaceObject),
        listed: () => {
          if (this.listed) return;
          this.listed = true;
          this.log.info({ namespaces: this.table.size }, "namespace labels: initial list complete");
          this.firstSync.resolve();
        },
        failed: (err) => (this.lastError = err),
      },
    );
  }

  /** True once the first list has completed; stays true (stale labels beat none) until close(). */
  get synced(): boolean {
    return this.listed && !this.closed;
  }

  /** For /readyz. */
  ready(): boolean {
    return this.synced;
  }

  /**
   * Lists namespaces, then keeps watching in the background. Resolves once the first list is in;
   * rejects, and stops everything, if that does not happen within the start timeout.
   */
  start(): Promise<void> {
    if (this.closed) return Promise.reject(new Error("namespace label cache is closed"));
    this.starting ??= this.startAndWait();
    return this.starting;
  }

  private async startAndWait(): Promise<void> {
    this.listWatch.start();
    const closed = this.lifetime.signal;
    let stopWaiting = () => {};
    const gaveUp = new Promise<void>((resolve) => {
      const stop = () => resolve();
      const timer = setTimeout(stop, this.startTimeoutMs);
      closed.addEventListener("abort", stop, { once: true });
      stopWaiting = () => {
        clearTimeout(timer);
        closed.removeEventListener("abort", stop);
      };
    });
    await Promise.race([this.firstSync.promise, gaveUp]);
    stopWaiting();
    if (this.closed) throw new KubeError("closed", "namespace label cache was closed while starting");
    if (!this.synced) {
      const last = this.lastError === undefined ? "no answer" : describeApiError(this.lastError);
      await this.close();
      throw new KubeApiError(
        this.lastError === undefined ? "timeout" : kubeApiErrorCode(this.lastError),
        `cannot list namespaces from the Kubernetes API at ${this.server} within ${this.startTimeoutMs / 1000} s ` +
          `(last error: ${last}); namespace labels are needed for namespaceSelector, so the server cannot start ` +
          `(the identity used needs list and watch on namespaces)`,
      );
    }
  }

  labels(namespace: string): Record<string, string> | undefined {
    return this.table.get(namespace);
  }

  /**
   * On a cache miss, reads the namespace with one GET (shared by concurrent callers), waiting at most
   * until `deadline`. Never rejects. What a GET stores is kept current only by a started cache's watch.
   */
  async prepare(namespace: string, deadline: number): Promise<void> {
    if (this.closed || this.table.has(namespace)) return;
    const now = Date.now();
    const notFoundUntil = this.notFoundUntil.get(namespace);
    if (notFoundUntil !== undefined) {
      if (notFoundUntil > now) return;
      this.notFoundUntil.delete(namespace);
    }
    if (deadline <= now) return;
    const pending = this.pending.get(namespace) ?? this.startGet(namespace, deadline);
    this.extend(pending, deadline);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([pending.done, new Promise<void>((resolve) => (timer = setTimeout(resolve, deadline - now)))]);
    clearTimeout(timer);
  }

  /** Stops the watch, pending GETs and timers; resolves once the loop and every GET have ended. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.stopAll();
    return this.closing;
  }

  private async stopAll(): Promise<void> {
    this.closed = true;
    this.lifetime.abort(new Error("namespace label cache closed"));
    for (const pending of this.pending.values()) pending.abort.abort(new Error("namespace label cache closed"));
    await Promise.all([this.listWatch.close(), ...[...this.pending.values()].map((p) => p.done)]);
  }

  // -------------------------------------------------------------------------------------------
  // List and watch

  /** One page of the list of namespaces. */
  private async listPage(continueToken: string | undefined): Promise<ListPage> {
    const page = asObject(
      await this.withTimeout(LIST_TIMEOUT_MS, "listing namespaces", (signal) =>
        this.kube.request("GET", NAMESPACES_PATH, { query: { limit: LIST_PAGE_SIZE, continue: continueToken }, signal }),
      ),
    );
    if (!Array.isArray(page?.items)) throw new KubeApiError("unavailable", `GET ${NAMESPACES_PATH}: the answer is not a list of namespaces`);
    const metadata = asObject(page.metadata);
    return {
      items: page.items,
      resourceVersion: typeof metadata?.resourceVersion === "string" ? metadata.resourceVersion : "",
      continueToken: typeof metadata?.continue === "string" && metadata.continue !== "" ? metadata.continue : undefined,
    };
  }

  /** After a full list: the table is every namespace listed. */
  private replaceAll(items: readonly NamespaceObject[]): void {
    this.table.clear();
    for (const ns of items) this.store(ns);
    // Names GET is fetching now may be older than this list.
    for (const pending of this.pending.values()) pending.superseded = true;
  }

  /** A watch event. */
  private apply(type: string, ns: NamespaceObject): void {
    const name = ns.metadata?.name;
    if (!name) return;
    if (type === "ADDED" || type === "MODIFIED") this.store(ns);
    else if (type === "DELETED") this.table.delete(name);
    else return;
    const pending = this.pending.get(name);
    if (pending) pending.superseded = true;
  }

  private store(ns: NamespaceObject): void {
    const name = ns.metadata?.name;
    if (typeof name !== "string" || name === "") return;
    // Kubernetes ≥ 1.21 sets this label on every namespace; older servers do not, and selectors
    // written against it must match the same way everywhere.
    this.table.set(name, Object.freeze({ "kubernetes.io/metadata.name": name, ...stringMap(ns.metadata?.labels) }));
    this.notFoundUntil.delete(name);
  }

  // -------------------------------------------------------------------------------------------
  // prepare(): one GET per missing name

  private startGet(namespace: string, deadline: number): PendingGet {
    const pending: PendingGet = { done: Promise.resolve(), abort: new AbortController(), deadline, timer: undefined, superseded: false };
    this.pending.set(namespace, pending);
    this.abortAt(pending, deadline);
    pending.done = this.get(namespace, pending).finally(() => {
      clearTimeout(pending.timer);
      this.pending.delete(namespace);
    });
    return pending;
  }

  /** A later caller keeps the shared GET alive until its own deadline. */
  private extend(pending: PendingGet, deadline: number): void {
    if (deadline > pending.deadline) this.abortAt(pending, deadline);
  }

  private abortAt(pending: PendingGet, deadline: number): void {
    pending.deadline = deadline;
    clearTimeout(pending.timer);
    const ms = Math.max(0, Math.min(deadline - Date.now(), MAX_GET_MS));
    pending.timer = setTimeout(() => pending.abort.abort(new Error(`no answer within ${ms} ms`)), ms);
  }

  private async get(namespace: string, pending: PendingGet): Promise<void> {
    const signal = AbortSignal.any([pending.abort.signal, this.lifetime.signal]);
    try {
      const ns = await this.kube.read(`${NAMESPACES_PATH}/${encodeURIComponent(namespace)}`, { signal });
      if (this.closed) return;
      if (ns === undefined) {
        this.rememberNotFound(namespace);
        return;
      }
      // The watch or a list said something newer meanwhile; it wins.
      if (!pending.superseded && !this.table.has(namespace)) this.store(ns as NamespaceObject);
    } catch (err) {
      if (this.closed) return;
      this.log.warn({ err: describeApiError(signal.aborted ? signal.reason : err), namespace }, "namespace labels: GET namespace failed");
    }
  }

  private rememberNotFound(namespace: string): void {
    const now = Date.now();
    if (this.notFoundUntil.size >= 1_000) {
      for (const [name, until] of this.notFoundUntil) if (until <= now) this.notFoundUntil.delete(name);
    }
    this.notFoundUntil.set(namespace, now + this.notFoundTtlMs);
  }

  // -------------------------------------------------------------------------------------------

  private async withTimeout<T>(ms: number, what: string, call: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
    const signal = AbortSignal.any([timeout.signal, this.lifetime.signal]);
    try {
      return await call(signal);
    } catch (err) {
      throw signal.aborted ? signal.reason : err;
    } finally {
      clearTimeout(timer);
    }
  }
}
