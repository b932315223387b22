// The loop that keeps a local copy of a kind of Kubernetes object current: list, then watch from the list's
// resource version; a watch that ends is resumed from the last version seen, one the server refuses with
// 410 Gone starts over with a list, and every failure is retried after an exponential backoff. Written here
// rather than taken from a client library's informer (@kubernetes/client-node's stopped for good after one failed list).
// ListWatch is the one wiring of it: the namespace label cache, the pod informer and the policy custom resources
// each give it their list page and their table, nothing else.
import type { Logger } from "pino";
import { sleepUnlessAborted } from "../async/sleep-unless-aborted.ts";
import { describeApiError, hasStatus } from "./api-requests.ts";
import type { KubeClient, QueryValue } from "./kube-client.ts";

/** How one watch ended. */
export interface WatchEnd {
  /** The error it ended with, if any (null or undefined: the server closed it). */
  error: unknown;
  /** The server refused the resource version (410 Gone): list again. */
  gone: boolean;
  /** At least one event arrived (the connection was healthy). */
  delivered: boolean;
}

/** A watch closed this soon with no event is treated as a failure, so a server that ends every watch is not hammered. */
const MIN_HEALTHY_WATCH_MS = 5_000;

export interface ListWatchSteps {
  /** Names the loop in log messages: "namespace labels", "policy resources". */
  what: string;
  /** Added to every log line of the loop. */
  logFields: Record<string, unknown>;
  log: Logger;
  minBackoffMs: number;
  maxBackoffMs: number;
  isClosed(): boolean;
  /** Whether there is no resource version to resume from. */
  needsList(): boolean;
  /** A full list; sets the resource version to resume from. */
  list(): Promise<void>;
  /** After each successful list (the first one completes the initial sync). */
  listed(): void;
  watchOnce(): Promise<WatchEnd>;
  /** Forgets the resource version, so that the next round lists. */
  expire(): void;
  /** The failure that caused a restart, for readiness messages. */
  failed(err: unknown): void;
  sleep(ms: number): Promise<void>;
}

/** Runs until `isClosed()`. Never rejects: every failure is logged and retried after a backoff. */
export async function runListWatch(steps: ListWatchSteps): Promise<void> {
  let failures = 0;
  while (!steps.isClosed()) {
    let failure: unknown;
    let stage: "list" | "watch" = "list";
    try {
      if (steps.needsList()) {
        await steps.list();
        steps.listed();
      }
      stage = "watch";
      const startedAt = Date.now();
      const end = await steps.watchOnce();
      if (steps.isClosed()) break;
      if (end.delivered) failures = 0;
      if (end.gone) {
        steps.expire();
        steps.log.info(steps.logFields, `${steps.what}: resource version expired; listing again`);
        continue;
      }
      if (end.error === null || end.error === undefined) {
        if (end.delivered || Date.now() - startedAt >= MIN_HEALTHY_WATCH_MS) {
          steps.log.debug(steps.logFields, `${steps.what}: watch ended; resuming`);
          continue;
        }
        failure = new Error("the server ended the watch at once");
      } else failure = end.error;
    } catch (err) {
      failure = err;
    }
    if (steps.isClosed()) break;
    steps.failed(failure);
    failures++;
    const delayMs = Math.min(steps.maxBackoffMs, steps.minBackoffMs * 2 ** Math.min(failures - 1, 30));
    steps.log.warn(
      { ...steps.logFields, err: describeApiError(failure), stage, attempt: failures, delayMs },
      `${steps.what}: ${stage} failed; restarting after backoff`,
    );
    await steps.sleep(delayMs);
  }
}

/** What one watch request hands on, and how its owner stops it. */
export interface WatchRequest {
  /** Called with every object event but bookmarks (ADDED, MODIFIED, DELETED), after the resource version moved. */
  object(type: string, object: unknown): void;
  /** The resource version to resume from moved on (any event carrying one, bookmarks included). */
  resourceVersion(version: string): void;
  /** Called with a function that ends the request at once while it runs, and with undefined once it ended. */
  running(stop: (() => void) | undefined): void;
  /** The owner closed meanwhile: a request that connects late is aborted at once. */
  isClosed(): boolean;
}

/**
 * One watch request from `query.resourceVersion`; resolves (never rejects) when it ends, as runListWatch expects:
 * an ERROR event or a refusal with 410 Gone asks for a list, another ERROR event is the end's error.
 */
export function watchOnce(client: KubeClient, path: string, query: Record<string, QueryValue>, request: WatchRequest): Promise<WatchEnd> {
  return new Promise<WatchEnd>((resolve) => {
    let settled = false;
    const controller = new AbortController();
    const end: WatchEnd = { error: null, gone: false, delivered: false };
    const finish = (error: unknown) => {
      if (settled) return;
      settled = true;
      request.running(undefined);
      end.error = error;
      if (hasStatus(error, 410)) end.gone = true;
      resolve(end);
    };
    request.running(() => {
      controller.abort(new Error("watch stopped"));
      finish(null);
    });
    if (request.isClosed()) {
      controller.abort(new Error("watch stopped"));
      finish(null);
      return;
    }
    const onEvent = (type: string, object: unknown) => {
      if (settled) return;
      if (type === "ERROR") {
        // A Status; the server closes the watch after it.
        const status = object as { code?: number; message?: string } | undefined;
        if (status?.code === 410) end.gone = true;
        else end.error = new Error(`watch error event: ${status?.code ?? "?"} ${status?.message ?? ""}`.trim());
        return;
      }
      const version = (object as { metadata?: { resourceVersion?: string } } | undefined)?.metadata?.resourceVersion;
      if (version) request.resourceVersion(version);
      end.delivered = true;
      if (object && type !== "BOOKMARK") request.object(type, object);
    };
    client.watch(path, query, onEvent, controller.signal).then(
      () => finish(end.error),
      (err: unknown) => finish(controller.signal.aborted ? null : err),
    );
  });
}

/** The API of one kind's list-then-watch: where it watches, and one page of its list. */
export interface ListWatchSource {
  /** Names the loop in log messages: "namespace labels", "policy resources", "pods". */
  what: string;
  /** Added to every log line of the loop. */
  logFields: Record<string, unknown>;
  log: Logger;
  minBackoffMs: number;
  maxBackoffMs: number;
  /** The watch path: "/api/v1/namespaces". */
  path: string;
  /** Added to every watch request (a label selector). */
  watchQuery?: Record<string, string>;
  /** One page of the list from `continueToken` (undefined: the first), bounded in time by its owner. */
  listPage(continueToken: string | undefined): Promise<ListPage>;
}

export interface ListPage {
  items: unknown[];
  resourceVersion: string;
  /** Undefined on the last page. */
  continueToken: string | undefined;
}

/** The local copy a list-then-watch keeps current: each owner's own table (labels, policy objects, a scan queue). */
export interface ListWatchTable {
  /**
   * What the table keeps of each listed object, made as its page arrives; absent: the object. A list of many pages
   * then holds what the table keeps rather than every page's parsed objects at once (5,000 pods: tens of MiB).
   */
  keep?(item: unknown): unknown;
  /** After each complete list: what was kept of every object that exists now (those not among them are gone). */
  replaceAll(items: unknown[]): void;
  /** An object ADDED, MODIFIED or DELETED. */
  apply(type: string, object: unknown): void;
  /** After each successful list (the first one completes the initial sync). */
  listed?(): void;
  /** A list or watch failed and is retried after a backoff. */
  failed?(err: unknown): void;
}

// The client takes a watch silent for 60 s as dead. Asking the server to end it sooner, with a bookmark just before
// (carrying a fresh resource version), makes quiet periods a routine reconnect.
const WATCH_TIMEOUT_SECONDS = 25;

/** One kind kept current in its owner's table, until close(). */
export class ListWatch {
  private readonly client: KubeClient;
  private readonly source: ListWatchSource;
  private readonly table: ListWatchTable;
  /** Aborted by close(): ends the backoff sleeps. */
  private readonly lifetime = new AbortController();
  /** Where the watch resumes; undefined means list first. */
  private resourceVersion: string | undefined;
  /** Ends the running watch request, if one runs. */
  private stopWatch: (() => void) | undefined;
  private closed = false;
  private loop: Promise<void> | undefined;

  constructor(client: KubeClient, source: ListWatchSource, table: ListWatchTable) {
    this.client = client;
    this.source = source;
    this.table = table;
  }

  /** Starts listing and watching in the background; the loop never rejects (failures are logged and retried). */
  start(): void {
    const s = this.source;
    this.loop ??= runListWatch({
      what: s.what,
      logFields: s.logFields,
      log: s.log,
      minBackoffMs: s.minBackoffMs,
      maxBackoffMs: s.maxBackoffMs,
      isClosed: () => this.closed,
      needsList: () => this.resourceVersion === undefined,
      list: async () => void (await this.list()),
      listed: () => this.table.listed?.(),
      watchOnce: () => this.watchOnce(),
      expire: () => (this.resourceVersion = undefined),
      failed: (err) => this.table.failed?.(err),
      sleep: (ms) => sleepUnlessAborted(ms, this.lifetime.signal),
    });
  }

  /** Stops the watch and the backoff; resolves once the loop has ended. */
  async close(): Promise<void> {
    this.closed = true;
    this.lifetime.abort(new Error(`${this.source.what}: closed`));
    this.stopWatch?.();
    await this.loop;
  }

  /** A full, paged list (consistent: later pages come from the first page's snapshot), handed to the table as it keeps it. */
  async list(): Promise<unknown[]> {
    const items: unknown[] = [];
    const keep = this.table.keep?.bind(this.table);
    let page: ListPage | undefined;
    do {
      page = await this.source.listPage(page?.continueToken);
      for (const item of page.items) items.push(keep ? keep(item) : item);
    } while (page.continueToken !== undefined);
    if (this.closed) return items;
    this.resourceVersion = page.resourceVersion;
    this.table.replaceAll(items);
    return items;
  }

  private watchOnce(): Promise<WatchEnd> {
    const query = { resourceVersion: this.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: WATCH_TIMEOUT_SECONDS, ...this.source.watchQuery };
    return watchOnce(this.client, this.source.path, query, {
      object: (type, object) => this.table.apply(type, object),
      resourceVersion: (version) => (this.resourceVersion = version),
      running: (stop) => (this.stopWatch = stop),
      isClosed: () => this.closed,
    });
  }
}
