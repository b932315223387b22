// Concurrent callers asking for the same thing (a ping, a token) share one request. A burst of pods with the
// same image on a cold client then costs one ping and one token request, not one per pod.
//
// The shared request runs without any one caller's signal (a caller giving up must not fail the others); it
// is bounded by the per-request timeout, and each caller stops waiting when its own signal aborts.

export class InFlight<T> {
  readonly #pending = new Map<string, Promise<T>>();

  /**
   * The pending result for `key`, or `task()` started now. `aborted` makes the caller's error when its signal
   * aborts; an already-aborted signal fails at once without starting anything.
   */
  run(key: string, task: () => Promise<T>, signal: AbortSignal | undefined, aborted: () => Error): Promise<T> {
    if (signal?.aborted) return Promise.reject(aborted());
    let pending = this.#pending.get(key);
    if (!pending) {
      pending = task().finally(() => this.#pending.delete(key));
      pending.catch(() => {}); // every caller handles the error; this copy must not count as unhandled
      this.#pending.set(key, pending);
    }
    return signal ? untilAborted(pending, signal, aborted) : pending;
  }
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal, aborted: () => Error): Promise<T> {
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
