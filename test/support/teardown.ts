// Teardown that always finishes: every step runs whatever the steps before it did (threw, rejected or hung),
// each within its own time limit, and the failures are reported together at the end. An `after` hook written
// as `await a.stop(); await b.stop();` leaves b running when a throws, and a child b started keeps the test
// file's process alive: the whole run then waits forever without printing the failure.

/** A step: a function to call, or nothing (a component the test never got to start). */
export type TeardownStep = (() => unknown) | undefined | null | false;

export interface TeardownOptions {
  /** Per step; a step that has not settled by then is reported and left behind. Default 120 s. */
  stepTimeoutMs?: number;
}

const DEFAULT_STEP_TIMEOUT_MS = 120_000;

/** Runs the steps in order; throws an AggregateError naming every step that failed or timed out. */
export async function teardown(steps: readonly TeardownStep[], opts: TeardownOptions = {}): Promise<void> {
  const limit = opts.stepTimeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
  const failures: Error[] = [];
  for (const [index, step] of steps.entries()) {
    if (!step) continue;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`did not finish within ${limit} ms`)), limit);
      timer.unref();
    });
    try {
      await Promise.race([Promise.resolve().then(step), timedOut]);
    } catch (err) {
      const name = step.name ? `${step.name} ` : "";
      failures.push(new Error(`teardown step ${index + 1} ${name}failed: ${(err as Error)?.message ?? String(err)}`, { cause: err }));
    } finally {
      clearTimeout(timer);
    }
  }
  if (failures.length > 0) throw new AggregateError(failures, failures.map((f) => f.message).join("; "));
}
