// Append-only JSON-lines audit log. Each record is written and fsync'ed before the admission is answered,
// so a crash right after an override cannot lose its record. Writes are serialized in one queue. A line left
// unfinished by a crash (never acknowledged) is moved aside when the log is opened, so the next record starts a
// line of its own.
import { open, type FileHandle } from "node:fs/promises";
import { dirname } from "node:path";
import { makeDirectory } from "../fs/make-directory.ts";
import { repairTornLastLine, type TornLineRepair } from "../fs/torn-line.ts";

export interface AuditRecord {
  time: string;
  /** Admission overrides; and at the node, every pull judged (pull-verified, pull-refused, pull-failed-open). */
  event: "break-glass" | "break-glass-refused" | "policy-exception" | "fail-open" | "pull-verified" | "pull-refused" | "pull-failed-open";
  [key: string]: unknown;
}

export interface AuditLogOptions {
  /**
   * Whether opening mends an unfinished last line (default true). False where other processes append to the same log
   * (serve --workers): the primary mends it before they start, and a worker must never cut another's record.
   */
  mendTornLine?: boolean;
  /** Called when opening the log cut an unfinished last line (a crash mid-write); the server logs it. */
  onTornLine?: (repair: TornLineRepair) => void;
}

/**
 * Moves an unfinished last line aside, as opening the log does by default: for a log several processes will append
 * to (serve --workers), mended once before they start. The repair made, if any.
 */
export function mendAuditLog(path: string): Promise<TornLineRepair | undefined> {
  return repairTornLastLine(path);
}

export class AuditLog {
  readonly path: string;
  private readonly opts: AuditLogOptions;
  private handle: Promise<FileHandle> | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(path: string, options: AuditLogOptions = {}) {
    this.path = path;
    this.opts = options;
  }

  /** Resolves once the record is on disk; rejects if it could not be made durable. */
  append(record: AuditRecord): Promise<void> {
    const line = `${JSON.stringify(record)}\n`;
    const write = this.queue.then(async () => {
      const fh = await this.file();
      await fh.appendFile(line, "utf8");
      await fh.datasync();
    });
    // Keep the queue going after a failure; the caller still sees its own rejection.
    this.queue = write.catch(() => {});
    return write;
  }

  async close(): Promise<void> {
    await this.queue;
    const h = this.handle;
    this.handle = undefined;
    if (h) await (await h).close();
  }

  private file(): Promise<FileHandle> {
    this.handle ??= (async () => {
      await makeDirectory(dirname(this.path), 0o700);
      const repair = this.opts.mendTornLine === false ? undefined : await repairTornLastLine(this.path);
      if (repair) this.opts.onTornLine?.(repair);
      return open(this.path, "a", 0o600);
    })();
    // A failed open is not remembered, so the next record tries again.
    this.handle.catch(() => {
      this.handle = undefined;
    });
    return this.handle;
  }
}
