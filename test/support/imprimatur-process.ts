// Runs the real `imprimatur serve` command as a child process, as an operator would.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createWriteStream } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.ts";
import { getText } from "./https-client.ts";
import { BIN } from "./cli-process.ts";
import { scanOutputsBeforeRemoval } from "./secret-ledger.ts";

export interface ImprimaturProcess {
  pid: number;
  port: number;
  baseUrl: string;
  stateDir: string;
  ca: string;
  logPath: string;
  log(): Promise<string>;
  stop(): Promise<void>;
}

/** `imprimatur serve` on 127.0.0.1:`port` with `stateDir`, as the arguments of this Node.js. */
export function serveCommandLine(port: number, stateDir: string, args: readonly string[]): string[] {
  // No drain period unless a test asks for one: stopping is then immediate, and tests stay fast.
  const drain = args.includes("--drain") ? [] : ["--drain", "0"];
  return [BIN, "serve", "--host", "127.0.0.1", "--port", String(port), "--state-dir", stateDir, ...drain, ...args];
}

export interface StartOptions {
  stateDir?: string;
  /** What start-up waits for: /readyz answering 200 (default), or only /healthz (a server that may stay unready). */
  until?: "ready" | "healthy";
  /** Options for Node.js itself, before the command (a module hook, say). */
  nodeArgs?: readonly string[];
}

export async function startImprimatur(args: string[], opts: StartOptions = {}): Promise<ImprimaturProcess> {
  const stateDir = opts.stateDir ?? (await mkdtemp(join(tmpdir(), "imprimatur-serve-")));
  const port = await freePort();
  const logPath = join(stateDir, "serve.log");
  const out = createWriteStream(logPath, { flags: "a" });
  const child: ChildProcess = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...serveCommandLine(port, stateDir, args)], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  const baseUrl = `https://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  let ca = "";
  for (;;) {
    if (child.exitCode !== null) throw new Error(`imprimatur serve exited with ${child.exitCode}: ${await readFile(logPath, "utf8")}`);
    try {
      ca ||= await readFile(join(stateDir, "ca.crt"), "utf8");
      if ((await getText(`${baseUrl}/${opts.until === "healthy" ? "healthz" : "readyz"}`, ca)).status === 200) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      kill();
      throw new Error(`imprimatur serve did not become ready: ${await readFile(logPath, "utf8").catch(() => "")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    pid: child.pid!,
    port,
    baseUrl,
    stateDir,
    ca,
    logPath,
    log: () => readFile(logPath, "utf8"),
    stop: async () => {
      process.off("exit", kill);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
      await new Promise<void>((resolve) => out.end(() => resolve()));
      // Its log and audit log are scanned for the suite's secrets before they go (secret-ledger.ts).
      const auditLog = args.includes("--audit-log") ? args[args.indexOf("--audit-log") + 1] : undefined;
      scanOutputsBeforeRemoval([logPath, auditLog ?? join(stateDir, "audit.jsonl")], "imprimatur serve");
      if (!opts.stateDir) await rm(stateDir, { recursive: true, force: true });
    },
  };
}
