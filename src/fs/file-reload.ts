// Files `serve` reads at start and keeps reading: the serving certificate (--tls-cert/--tls-key), the client CA
// (--client-ca) and the caller tokens (--caller-tokens). Replacing a file rotates what it holds, without a restart.
// The files are polled by content rather than watched: a mounted Secret is updated by the kubelet swapping its
// `..data` symlink to a new folder, which a watch on the files themselves does not see, and polling a few small
// files every few seconds costs nothing.
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export const FILE_POLL_INTERVAL_MS = 2000;

export interface WatchedFilesOptions<T> {
  /** Read together; `parse` receives their contents in this order. */
  files: readonly string[];
  /** What the files hold, for the log: "serving certificate". */
  what: string;
  /** The value the contents stand for; throws, with a message naming the file (and line), when they are not usable. */
  parse(texts: readonly string[]): T;
  logger: Logger;
  intervalMs?: number;
}

/** A watched file that cannot be read; the message names it and says why (ENOENT, EACCES, …). */
export class FileReadError extends ImprimaturError<"unreadable-file"> {}

export class WatchedFiles<T> {
  private value: T;
  /** The contents `value` was made from. */
  private appliedKey: string;
  /** New contents read by the last poll, waiting to read the same once more. */
  private seenKey: string | undefined;
  /** The last problem logged (unreadable files, or contents that did not parse), so each is logged once. */
  private reported: string | undefined;
  private readonly listeners = new Set<(value: T) => void>();
  private readonly opts: WatchedFilesOptions<T>;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  /** Reads and parses the files (throwing as `parse` does), then polls them. */
  static async start<T>(opts: WatchedFilesOptions<T>): Promise<WatchedFiles<T>> {
    const texts = await readAll(opts.files);
    const watched = new WatchedFiles(opts, texts, opts.parse(texts));
    watched.schedule();
    return watched;
  }

  private constructor(opts: WatchedFilesOptions<T>, texts: readonly string[], value: T) {
    this.opts = opts;
    this.value = value;
    this.appliedKey = keyOf(texts);
  }

  current(): T {
    return this.value;
  }

  /** Calls `listener` with every new value; returns the unsubscribe. */
  subscribe(listener: (value: T) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.listeners.clear();
  }

  /**
   * One look at the files. New contents are taken once two polls in a row read them alike, so a writer that
   * replaces the files one after the other is done by then; contents that do not parse are logged and the previous
   * value stays.
   */
  async poll(): Promise<void> {
    const { files, what, logger } = this.opts;
    let texts: readonly string[];
    try {
      texts = await readAll(files);
    } catch (e) {
      this.report(`unreadable: ${(e as Error).message}`, () =>
        logger.error({ files, error: (e as Error).message }, `${what}: cannot read the files; keeping the one in use`),
      );
      return;
    }
    const key = keyOf(texts);
    if (key === this.appliedKey) {
      this.seenKey = undefined;
      this.reported = undefined;
      return;
    }
    if (key !== this.seenKey) {
      this.seenKey = key;
      return;
    }
    let next: T;
    try {
      next = this.opts.parse(texts);
    } catch (e) {
      this.report(`refused: ${key}`, () =>
        logger.error({ files, error: (e as Error).message }, `${what}: the new files are not usable; keeping the one in use`),
      );
      return;
    }
    this.value = next;
    this.appliedKey = key;
    this.seenKey = undefined;
    this.reported = undefined;
    logger.info({ files }, `${what}: reloaded from the files`);
    for (const listener of this.listeners) listener(next);
  }

  private report(problem: string, log: () => void): void {
    if (this.reported === problem) return;
    this.reported = problem;
    log();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.poll().finally(() => this.schedule()), this.opts.intervalMs ?? FILE_POLL_INTERVAL_MS);
    // Polling alone does not keep the process running.
    this.timer.unref();
  }
}

async function readAll(files: readonly string[]): Promise<string[]> {
  return Promise.all(
    files.map((file) =>
      readFile(file, "utf8").catch((e: NodeJS.ErrnoException) => {
        throw new FileReadError("unreadable-file", `cannot read ${file}: ${e.code ?? e.message}`, { cause: e });
      }),
    ),
  );
}

/** The contents as one string; the separator cannot occur in text files. */
function keyOf(texts: readonly string[]): string {
  return texts.join("\0");
}
