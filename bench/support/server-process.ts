// The webhook servers the benchmarks run as child processes (`imprimatur serve`, bench/baseline-server.ts):
// started on a free loopback port, ready once GET /readyz answers 200 over TLS, stopped by PID.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Agent } from "undici";
import { parseAllDocuments } from "yaml";
import { freePort } from "../../test/support/ports.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** How long a server may take to answer /readyz; exported for the benchmarks' watchdog budgets. */
export const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

export interface ServerProcess {
  name: string;
  child: ChildProcess;
  port: number;
  origin: string;
  exited: Promise<void>;
  stderr(): string;
}

/**
 * `imprimatur serve` on 127.0.0.1, its CA, certificate and webhook configuration in `stateDir`; `entry` is the
 * command's bin/imprimatur.js (default: the checkout's; installed-app.ts gives the image's).
 */
export function imprimaturServeArgs(stateDir: string, extra: string[] = [], entry = "bin/imprimatur.js"): (port: number) => string[] {
  return (port) => [entry, "serve", "--host", "127.0.0.1", "--port", String(port), "--state-dir", stateDir, ...extra];
}

/**
 * The Node.js flags the installed Deployment gives serve (its container's NODE_OPTIONS, deploy/base/core), so that a
 * benchmark of memory measures the heap the installed server has.
 */
export function deployedNodeFlags(): string[] {
  const text = readFileSync(join(ROOT, "deploy/base/core/deployment.yaml"), "utf8");
  for (const doc of parseAllDocuments(text)) {
    const deployment = doc.toJS() as {
      kind?: string;
      spec?: { template?: { spec?: { containers?: Array<{ name?: string; env?: Array<{ name?: string; value?: string }> }> } } };
    };
    if (deployment?.kind !== "Deployment") continue;
    const container = deployment.spec?.template?.spec?.containers?.find((c) => c.name === "imprimatur");
    const options = container?.env?.find((e) => e.name === "NODE_OPTIONS")?.value;
    if (options) return options.split(/\s+/).filter(Boolean);
  }
  throw new Error("deploy/base/core/deployment.yaml: the imprimatur container sets no NODE_OPTIONS");
}

/** bench/baseline-server.ts with the certificate imprimatur generated in `stateDir`, so both handshakes cost the same. */
export function baselineServerArgs(stateDir: string, extra: string[] = []): (port: number) => string[] {
  return (port) => [
    "bench/baseline-server.ts",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--cert",
    join(stateDir, "tls.crt"),
    "--key",
    join(stateDir, "tls.key"),
    ...extra,
  ];
}

/**
 * Starts `node [nodeFlags] ...argsFor(port)` from the repository root on a free loopback port and waits until
 * GET /readyz answers 200 over TLS trusting `caFile` (which the server may create first). The port is only known
 * free when chosen, so a start that fails with "address in use" is retried on another.
 */
export async function startServer(
  name: string,
  argsFor: (port: number) => string[],
  caFile: string,
  stdout: number | "ignore",
  nodeFlags: string[] = [],
): Promise<ServerProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = spawn(process.execPath, [...nodeFlags, ...argsFor(port)], { cwd: ROOT, stdio: ["ignore", stdout, "pipe"] });
    let stderr = "";
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (s: string) => {
      if (stderr.length < 64 * 1024) stderr += s;
    });
    const exited = new Promise<void>((resolveExit) => {
      child.once("exit", () => resolveExit());
      child.once("error", (err) => {
        stderr += `spawn failed: ${err.message}\n`;
        resolveExit();
      });
    });
    const origin = `https://127.0.0.1:${port}`;
    const outcome = await Promise.race([waitReady(origin, caFile).then(() => "ready" as const), exited.then(() => "exited" as const)]);
    if (outcome === "ready") return { name, child, port, origin, exited, stderr: () => stderr };
    if (attempt < 3 && /EADDRINUSE|address already in use/i.test(stderr)) continue;
    throw new Error(`${name} exited (${child.signalCode ?? `code ${child.exitCode}`}) before it was ready:\n${stderr.trim()}`);
  }
}

async function waitReady(origin: string, caFile: string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let last = "no attempt";
  while (Date.now() < deadline) {
    if (existsSync(caFile)) {
      const agent = new Agent({ connect: { ca: readFileSync(caFile, "utf8") }, headersTimeout: 2_000, bodyTimeout: 2_000 });
      try {
        const res = await agent.request({ origin, path: "/readyz", method: "GET" });
        await res.body.dump();
        if (res.statusCode === 200) return;
        last = `status ${res.statusCode}`;
      } catch (e) {
        last = (e as Error).message;
      } finally {
        await agent.close();
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${origin}/readyz not 200 within ${READY_TIMEOUT_MS / 1000} s (last: ${last})`);
}

export function hasExited(proc: ServerProcess): boolean {
  return proc.child.exitCode !== null || proc.child.signalCode !== null;
}

/** SIGTERM, then SIGKILL if it does not exit in time (a CPU profile is only written on a clean exit). */
export async function stopServer(proc: ServerProcess | undefined): Promise<void> {
  if (!proc || hasExited(proc)) return;
  proc.child.kill("SIGTERM");
  const timer = setTimeout(() => proc.child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  await proc.exited;
  clearTimeout(timer);
}

/** Signals the servers still running without waiting: for a watchdog or an interrupt that exits right after. */
export function signalServers(procs: Iterable<ServerProcess | undefined>, signal: NodeJS.Signals): void {
  for (const p of procs) if (p && !hasExited(p)) p.child.kill(signal);
}
