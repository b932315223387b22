// Stopping `imprimatur` when npm, which started it, is stopped. `npx imprimatur serve` (like npm exec and npm run)
// runs the command through a shell: npm -> sh -c "imprimatur serve" -> node. npm passes SIGTERM and SIGINT on to
// that shell only, and the shell (dash, the sh of Debian and Ubuntu) ends at once without passing them on: the
// server would go on running, reparented, after `kill` of the process the user started. So, when npm started
// this process, the end of its parent stands for that signal: it sends itself SIGTERM, which the command answers
// as it answers the signal itself (serve stops taking requests, drains and exits).
// Plain JavaScript like bin/imprimatur.js.

/** How often the parent is looked at, in milliseconds: a stop reaches the command within about this long. */
export const PARENT_CHECK_MS = 300;

/**
 * Whether npm started this process (npx, npm exec, npm run, npm start all set npm_command).
 * @param {Record<string, string | undefined>} env
 * @returns {boolean}
 */
export function startedByNpm(env) {
  return typeof env.npm_command === "string" && env.npm_command !== "";
}

/**
 * When npm started this process, watches its parent and sends the process SIGTERM once that parent is gone.
 * @param {{ env: Record<string, string | undefined>, platform: string, pid: number, readonly ppid: number,
 *   kill(pid: number, signal: string): unknown }} proc the process (process, or a stand-in in tests)
 * @param {number} [intervalMs]
 * @returns {(() => void) | undefined} stops watching; undefined when there is nothing to watch
 */
export function followLauncher(proc, intervalMs = PARENT_CHECK_MS) {
  if (proc.platform === "win32" || !startedByNpm(proc.env)) return undefined;
  const parent = proc.ppid;
  // Already reparented to init: nothing that a stop could come through.
  if (parent <= 1) return undefined;
  const timer = setInterval(() => {
    if (proc.ppid === parent) return;
    clearInterval(timer);
    proc.kill(proc.pid, "SIGTERM");
  }, intervalMs);
  // Watching never keeps the process alive by itself.
  timer.unref?.();
  return () => clearInterval(timer);
}
