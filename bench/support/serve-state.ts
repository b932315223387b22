// The temporary state folder a benchmark gives `imprimatur serve` (its CA, certificate and webhook
// configuration land there) and the file its log (stdout) goes to.
import { closeSync, openSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface ServeState {
  stateDir: string;
  /** The CA serve generates; clients trust it. */
  caFile: string;
  logFile: string;
  /** logFile open for writing, to pass as the server's stdout. */
  logFd: number;
  /** Closes logFd; safe to call again, as both the normal path and the cleanup do. */
  closeLog(): void;
}

export async function createServeState(prefix: string, logName: string): Promise<ServeState> {
  const stateDir = await mkdtemp(join(tmpdir(), prefix));
  const logFile = join(stateDir, logName);
  const logFd = openSync(logFile, "w");
  let logOpen = true;
  const closeLog = () => {
    if (logOpen) closeSync(logFd);
    logOpen = false;
  };
  return { stateDir, caFile: join(stateDir, "ca.crt"), logFile, logFd, closeLog };
}
