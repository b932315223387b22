/**
 * Runs `run` soon after a change, and at most once per `minIntervalMs` while changes keep coming. The first change
 * after a quiet spell runs after `settleMs` (the objects of one `kubectl apply` arrive within it), so one edit takes
 * effect at once; in a stream of changes (thousands of objects applied) a run comes every `minIntervalMs`, each
 * taking what arrived since the last, and one after the last change. A run reads the state as it is when it runs:
 * every change before it is in it, and a change during or after it schedules the next.
 */
export interface ChangeCoalescer {
  changed(): void;
  close(): void;
}

export function coalesceChanges(run: () => void, settleMs: number, minIntervalMs: number, now: () => number = Date.now): ChangeCoalescer {
  let timer: NodeJS.Timeout | undefined;
  let lastRun = -Infinity;
  let closed = false;
  return {
    changed() {
      if (closed || timer !== undefined) return; // the run already scheduled will see this change
      const wait = Math.max(settleMs, lastRun + minIntervalMs - now());
      timer = setTimeout(() => {
        timer = undefined;
        lastRun = now();
        run();
      }, wait);
    },
    close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
