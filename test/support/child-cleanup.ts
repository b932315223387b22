// The processes and temp folders the harnesses start, and killing/removing them if the test process dies
// first (an exception, Ctrl-C, a runner timeout), so no etcd, apiserver or registry outlives its test.
import type { ChildProcess } from "node:child_process";
import { rmSync } from "node:fs";

/** Harnesses add a child when they spawn it and delete it once it has exited. */
export const liveChildren = new Set<ChildProcess>();
/** Harnesses add their private temp folders and delete them once removed. */
export const liveDirs = new Set<string>();
let exitHooksInstalled = false;

function killEverythingNow(): void {
  for (const child of liveChildren) {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
  liveChildren.clear();
  for (const dir of liveDirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort while exiting
    }
  }
  liveDirs.clear();
}

export function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on("exit", killEverythingNow);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      killEverythingNow();
      // If nobody else handles the signal, restore its default effect (terminate).
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}
