// Loaded into every test file's process (`node --import`, see scripts/run-tests.sh): every child process the
// file starts, by any harness or test, is tracked, and those still running when the process exits are killed
// by PID and named on stderr. With `--test-force-exit` the process exits once its tests and hooks are done (a
// hook that hangs fails at --test-timeout), so no forgotten registry or server keeps a test file, and with it
// the whole run, alive.
import { ChildProcess } from "node:child_process";
import { basename } from "node:path";
import { installExitHooks, liveChildren } from "./child-cleanup.ts";

// Every asynchronous way of starting a child (spawn, exec, execFile, fork) goes through this method; Node's
// typings leave it out.
type Spawning = { spawn(this: ChildProcess, options: unknown): unknown };
const prototype = ChildProcess.prototype as unknown as Spawning;
const originalSpawn = prototype.spawn;
prototype.spawn = function trackedSpawn(this: ChildProcess, options: unknown) {
  const result = originalSpawn.call(this, options);
  if (this.pid !== undefined) {
    liveChildren.add(this);
    this.once("exit", () => liveChildren.delete(this));
  }
  return result;
};

process.on("exit", () => {
  const left = [...liveChildren].filter((c) => c.exitCode === null && c.signalCode === null);
  if (left.length === 0) return;
  const file = basename(process.argv[1] ?? "test file");
  const names = left.map((c) => `${c.pid} (${c.spawnargs.join(" ").slice(0, 120)})`).join(", ");
  process.stderr.write(`[test-file-guard] ${file} ended with ${left.length} child process(es) still running; killed: ${names}\n`);
});
// The runner reads this process's test results from its stdout, a pipe, and --test-force-exit ends the process
// as soon as the tests are done: writes to a pipe are asynchronous, so results still queued were lost (up to a
// tenth of a file's tests went unreported, a different tenth each run). Blocking writes are done before exit.
(process.stdout as unknown as { _handle?: { setBlocking?(blocking: boolean): void } })._handle?.setBlocking?.(true);

// child-cleanup's exit hook (added after the listener above) kills them and removes the harnesses' temp folders.
installExitHooks();
