// Long-running components the harnesses start (containerd, the kubelet, the control plane): one log file each
// (stdout and stderr together, in order), the command line beside it, optionally inside a network namespace,
// and stopped by PID — SIGTERM, then SIGKILL after a grace period.

import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { closeSync, openSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { liveChildren } from "./child-cleanup.ts";
import { inNetns, nsenterPath } from "./netns.ts";
import { scanOutputsBeforeRemoval } from "./secret-ledger.ts";

export interface LoggedProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  /** DIR/NAME.log */
  logPath: string;
  /** Set once the process has exited. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  exited: Promise<void>;
}

export interface SpawnLoggedOptions {
  /** Working directory; the log and NAME.cmdline are written there. */
  dir: string;
  env: NodeJS.ProcessEnv;
  /** Run inside this network namespace (nsenter execs the program: the PID is the program's). */
  netns?: string;
  /** Also SIGKILL it if the test process exits first (child-cleanup.ts). Harnesses with their own exit-time cleanup leave it off. */
  killAtExit?: boolean;
}

export function spawnLogged(name: string, bin: string, args: string[], opts: SpawnLoggedOptions): LoggedProcess {
  const logPath = join(opts.dir, `${name}.log`);
  writeFileSync(join(opts.dir, `${name}.cmdline`), [bin, ...args].join("\n") + "\n");
  const log = openSync(logPath, "a");
  let child: ChildProcess;
  try {
    const [program, argv] = opts.netns === undefined ? [bin, args] : [nsenterPath(), inNetns(opts.netns, bin, args)];
    child = spawn(program, argv, { cwd: opts.dir, env: opts.env, stdio: ["ignore", log, log] });
  } finally {
    closeSync(log);
  }
  if (child.pid === undefined) throw new Error(`could not start ${name} (${bin})`);
  if (opts.killAtExit) liveChildren.add(child);
  return followExit({ name, child, pid: child.pid, logPath, exit: null, exited: Promise.resolve() });
}

/**
 * Sets `exit` and resolves `exited` when the child exits, and drops it from child-cleanup.ts's list then. A process
 * with a `logPath` has its log scanned for the suite's secrets then (secret-ledger.ts), before anyone removes it.
 */
export function followExit<P extends Pick<LoggedProcess, "child" | "exit" | "exited">>(proc: P): P {
  proc.exited = new Promise<void>((resolve) => {
    proc.child.once("exit", (code, signal) => {
      proc.exit = { code, signal };
      liveChildren.delete(proc.child);
      const logPath = (proc as { logPath?: unknown }).logPath;
      if (typeof logPath === "string") scanOutputsBeforeRemoval([logPath], "a process log");
      resolve();
    });
  });
  return proc;
}

export function describeExit(proc: Pick<LoggedProcess, "exit">): string {
  if (!proc.exit) return "still running";
  return proc.exit.signal ? `signal ${proc.exit.signal}` : `code ${proc.exit.code}`;
}

export function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** SIGTERM by PID, wait; SIGKILL if it has not exited within graceMs. */
export async function terminate(proc: Pick<LoggedProcess, "pid" | "exit" | "exited">, graceMs: number): Promise<void> {
  if (proc.exit) return;
  signalPid(proc.pid, "SIGTERM");
  const abort = new AbortController();
  const exited = await Promise.race([proc.exited.then(() => true), sleep(graceMs, false, { signal: abort.signal }).catch(() => false)]);
  abort.abort();
  if (exited) return;
  signalPid(proc.pid, "SIGKILL");
  await proc.exited;
}
