// Concurrent callers asking for the same thing (a ping, a token, a pull secret) share one request. A burst of
// pods with the same image on a cold client then costs one ping and one token request, not one per pod.
// With a TTL, a result is also kept for that long after it arrives (failures never are): pull secrets and
// service accounts are read at most once per TTL per object.
//
// The shared request runs without any one caller's signal (a caller giving up must not fail the others); it
// is bounded by the per-request timeout, and each caller stops waiting when its own signal aborts.

export interface InFlightOptions {
  /** How long a result is reused after it arrives; 0 (the default): only while it is pending. */
  ttlMs?: number;
  /** The clock for the TTL; Date.now by default. */
  now?: () => number;
}

// Expired results are swept only once this many are kept.
const SWEEP_THRESHOLD = 1_000;

interface Entry<T> {
  value: Promise<T>;
  /** Set when the result arrives (TTL only); until then the entry is pending. */
  expiresAt: number | undefined;
  /** The result once it arrived (TTL only), for peek(). */
  settled?: { value: T };
}

export class InFlight<T> {
  readonly #entries = new Map<string, Entry<T>>();
  readonly #ttlMs: number;
  readonly #now: () => number;

  constructor(options: InFlightOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 0;
    this.#now = options.now ?? Date.now;
  }

  /**
   * The pending (or kept) result for `key`, or `task()` started now. `aborted` makes the caller's error when
   * its signal aborts (by default the signal's reason); an already-aborted signal fails at once without
   * starting anything.
   */
  run(key: string, task: () => Promise<T>, signal?: AbortSignal, aborted: () => unknown = () => signal?.reason): Promise<T> {
    if (signal?.aborted) return Promise.reject(aborted());
    const now = this.#now();
    let entry = this.#entries.get(key);
    if (entry !== undefined && entry.expiresAt !== undefined && entry.expiresAt <= now) {
      this.#entries.delete(key);
      entry = undefined;
    }
    if (entry === undefined) {
      if (this.#ttlMs > 0 && this.#entries.size >= SWEEP_THRESHOLD) this.#sweep(now);
      entry = this.#start(key, task);
    }
    return signal ? untilAborted(entry.value, signal, aborted) : entry.value;
  }

  /**
   * The kept result for `key` when it has arrived and not expired, without starting anything: for callers that can
   * answer at once when everything they need is at hand, and take run()'s path otherwise.
   */
  peek(key: string): T | undefined {
    const entry = this.#entries.get(key);
    if (entry?.settled === undefined || entry.expiresAt === undefined || entry.expiresAt <= this.#now()) return undefined;
    return entry.settled.value;
  }

  #start(key: string, task: () => Promise<T>): Entry<T> {
    const entry: Entry<T> = { value: Promise.resolve() as Promise<T>, expiresAt: undefined };
    const forget = (): void => {
      if (this.#entries.get(key) === entry) this.#entries.delete(key);
    };
    entry.value = task().then(
      (value) => {
        if (this.#ttlMs > 0) {
          entry.expiresAt = this.#now() + this.#ttlMs;
          entry.settled = { value };
        } else forget();
        return value;
      },
      (error: unknown) => {
        forget();
        throw error;
      },
    );
    entry.value.catch(() => {}); // every caller handles the error; this copy must not count as unhandled
    this.#entries.set(key, entry);
    return entry;
  }

  #sweep(now: number): void {
    for (const [key, entry] of this.#entries) if (entry.expiresAt !== undefined && entry.expiresAt <= now) this.#entries.delete(key);
  }
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, aborted: () => unknown): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(aborted());
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
