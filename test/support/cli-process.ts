// Runs the `imprimatur` command as a user does: bin/imprimatur.js in a child process, with this Node.js
// (the project's Node.js 24 when the tests run through npm test).
import { spawn, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function imprimatur(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Result> {
  return run(process.execPath, [BIN, ...args], opts);
}

export function run(command: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd ?? REPO_ROOT, env: opts.env ?? process.env, stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** Whether COMMAND runs here (`COMMAND --version` exits 0). */
export function installed(command: string): boolean {
  const r = spawnSync(command, ["--version"], { stdio: "ignore" });
  return r.error === undefined && r.status === 0;
}
