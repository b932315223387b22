/**
 * Runs `run` once changes stop coming. A change after a quiet spell runs after `settleMs` (the objects of one
 * `kubectl apply` of a few arrive within it), so one edit takes effect at once; a change that comes while a run
 * is pending makes it a stream, and the run waits until `quietMs` have passed without a change (thousands of
 * objects applied are one reload, not one each: a reload of a large set costs a good part of a second). A run
 * reads the state as it is when it runs, so every change before it is in it.
 */
export interface ChangeCoalescer {
  changed(): void;
  close(): void;
}

export function coalesceChanges(run: () => void, settleMs: number, quietMs: number, now: () => number = Date.now): ChangeCoalescer {
  let timer: NodeJS.Timeout | undefined;
  let lastChange = -Infinity;
  let closed = false;
  return {
    changed() {
      if (closed) return;
      const at = now();
      const inStream = timer !== undefined || at - lastChange < quietMs;
      lastChange = at;
      clearTimeout(timer);
      timer = setTimeout(
        () => {
          timer = undefined;
          run();
        },
        inStream ? quietMs : settleMs,
      );
    },
    close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
