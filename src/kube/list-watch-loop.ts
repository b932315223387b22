// The loop that keeps a local copy of a kind of Kubernetes object current: list, then watch from the list's
// resource version; a watch that ends is resumed from the last version seen, one the server refuses with
// 410 Gone starts over with a list, and every failure is retried after an exponential backoff. Written here
// rather than taken from @kubernetes/client-node's informer, which stops for good after one failed list.
import type { Watch } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { describeApiError, hasStatus } from "./api-requests.ts";

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
export function watchOnce(watch: Watch, path: string, query: Record<string, string | number | boolean | undefined>, request: WatchRequest): Promise<WatchEnd> {
  return new Promise<WatchEnd>((resolve) => {
    let settled = false;
    let controller: AbortController | undefined;
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
      controller?.abort();
      finish(null);
    });
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
    watch
      .watch(path, query, onEvent, (err: unknown) => finish(err ?? end.error))
      .then((started) => {
        if (settled || request.isClosed()) started.abort();
        else controller = started;
      })
      .catch((err: unknown) => finish(err));
  });
}
