// Short commands the harnesses run to completion (skopeo, ctr): output collected, a time limit, and never a
// rejection, so a failing tool is an exit code and a message in the test's assertion, not an unhandled error.
import { spawn } from "node:child_process";
import { liveChildren } from "./child-cleanup.ts";

export interface CommandOutput {
  /** The exit code; -1 when the command could not be started or was killed at its time limit. */
  code: number;
  stdout: Buffer;
  /** The command's stderr, then a line of the harness's own when it failed to start or timed out. */
  stderr: string;
}

export interface CommandOptions {
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  /** How the harness's own lines name the command, e.g. "[registry] skopeo copy" (no secrets: it is printed). */
  label: string;
  input?: string;
}

export function runCommand(bin: string, args: string[], opts: CommandOptions): Promise<CommandOutput> {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { env: opts.env, stdio: ["pipe", "pipe", "pipe"] });
    liveChildren.add(child);
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let note = "";
    const timer = setTimeout(() => {
      note = `\n${opts.label} timed out after ${opts.timeoutMs} ms`;
      child.kill("SIGKILL");
    }, opts.timeoutMs);
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    child.stdin.on("error", () => {
      // the command may exit without reading its input; its exit code tells the story
    });
    child.on("error", (err) => {
      note += `\n${opts.label}: ${err.message}`;
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      liveChildren.delete(child);
      resolve({ code: note !== "" || code === null ? -1 : code, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr).toString("utf8") + note });
    });
    child.stdin.end(opts.input ?? "");
  });
}
