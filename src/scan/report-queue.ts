/**
 * The background scan's report writes, apart from the judging: the next pods are judged while a report is on its
 * way. A pod's writes go in order, each after the one before it ends; different pods' go at once (the report
 * writer bounds the requests in flight).
 */
export class ReportQueue {
  private readonly writing = new Map<string, Promise<void>>();
  private readonly onSettled: () => void;

  /** `onSettled` is called each time a write ends (the scan waits for its writes to say it is complete). */
  constructor(onSettled: () => void) {
    this.onSettled = onSettled;
  }

  /** Runs `write` for the pod `uid` once its earlier writes ended. `write` reports its own failures: it must not reject. */
  add(uid: string, write: () => Promise<void>): void {
    const before = this.writing.get(uid);
    const queued = (async () => {
      await before;
      await write();
    })().finally(() => {
      if (this.writing.get(uid) === queued) this.writing.delete(uid);
      this.onSettled();
    });
    this.writing.set(uid, queued);
  }

  /** Pods with a write on its way. */
  get size(): number {
    return this.writing.size;
  }

  /** Resolves once the pod's writes queued so far have ended. */
  async settled(uid: string): Promise<void> {
    await this.writing.get(uid);
  }

  /** Resolves once every write queued so far has ended. */
  async all(): Promise<void> {
    await Promise.all(this.writing.values());
  }
}
