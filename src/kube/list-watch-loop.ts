// The loop that keeps a local copy of a kind of Kubernetes object current: list, then watch from the list's
// resource version; a watch that ends is resumed from the last version seen, one the server refuses with
// 410 Gone starts over with a list, and every failure is retried after an exponential backoff. Written here
// rather than taken from @kubernetes/client-node's informer, which stops for good after one failed list.
import type { Logger } from "pino";
import { describeApiError } from "./api-requests.ts";

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
