/**
 * The background scan's rate: at most `perSecond` pods started a second on average. It waits only when the scan
 * is ahead of that by more than MIN_WAIT_MS: a timer cannot wait less than a millisecond, so waiting after every
 * pod held a scan at 10,000 a second to under 1,000. After a slow stretch (pods that took long to judge) the scan
 * may catch up, by at most a second's worth of pods.
 */
export class ScanPacer {
  private readonly spacingMs: number;
  private readonly now: () => number;
  private windowStart = 0;
  private startedInWindow = 0;

  constructor(perSecond: number, now: () => number = Date.now) {
    this.spacingMs = 1000 / perSecond;
    this.now = now;
  }

  /** Counts one pod started now; returns how long to wait before starting the next (0: at once). */
  started(): number {
    const now = this.now();
    const due = this.windowStart + this.startedInWindow * this.spacingMs;
    if (this.startedInWindow === 0 || due < now - CATCH_UP_MS) {
      this.windowStart = now;
      this.startedInWindow = 0;
    }
    this.startedInWindow++;
    const next = this.windowStart + this.startedInWindow * this.spacingMs;
    return next - now > MIN_WAIT_MS ? next - now : 0;
  }
}

/** Below this the scan does not wait: timers are coarser than that, and the rate holds on average. */
const MIN_WAIT_MS = 5;
/** How far behind its rate the scan may be before it stops catching up. */
const CATCH_UP_MS = 1000;
