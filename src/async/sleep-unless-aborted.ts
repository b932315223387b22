// One abortable sleep for every retry and backoff loop (the list-and-watch loops, the image review backends).

/**
 * Resolves after `ms`, or at once when `signal` is aborted or already was; its 'abort' listener is removed either
 * way (a listener per sleep would pile up on a signal that lives as long as the process). Never rejects: the
 * caller's loop checks the signal itself.
 */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
