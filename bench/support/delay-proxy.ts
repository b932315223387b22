// A TCP proxy on 127.0.0.1 that adds a fixed latency to every round trip through it: each chunk read from either
// side is written to the other half the delay later, in the order read (timers of one duration fire in the order
// they were set), and so is each side's end. It only forwards bytes: TLS passes through untouched, so a client
// still checks the upstream server's certificate (one for 127.0.0.1 serves any port of it). A request on a
// keep-alive connection then costs the delay once more than without the proxy, and a new connection's
// handshake costs it once per flight.
//
//   node bench/support/delay-proxy.ts --target 127.0.0.1:PORT --delay-ms 50
//
// prints {"port":N} on a line once it listens, and runs until SIGTERM or SIGINT or until its stdin closes (so it
// ends with the benchmark that started it, even one that was killed). startDelayProxy() starts it as such a child
// process; createDelayProxy() runs one in the calling process.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, connect, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

export interface DelayProxyTarget {
  host: string;
  port: number;
}

export interface InProcessDelayProxy {
  port: number;
  server: Server;
  close(): Promise<void>;
}

/** Forwards `from`'s bytes and end to `to`, each `delayMs` after it was read. */
function relay(from: Socket, to: Socket, delayMs: number): void {
  const later = delayMs > 0 ? (fn: () => void) => void setTimeout(fn, delayMs) : (fn: () => void) => fn();
  from.on("data", (chunk: Buffer) => later(() => to.write(chunk)));
  from.on("end", () => later(() => to.end()));
  // A reset or error on one side resets the other (after the delay, so what was read before still arrives first).
  from.on("error", () => later(() => to.destroy()));
}

/** A delaying proxy in this process, listening on 127.0.0.1 (port 0: any free port). */
export async function createDelayProxy(target: DelayProxyTarget, roundTripDelayMs: number, port = 0): Promise<InProcessDelayProxy> {
  const oneWay = roundTripDelayMs / 2;
  const sockets = new Set<Socket>();
  const server = createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    const upstream = connect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
    }
    relay(client, upstream, oneWay);
    relay(upstream, client, oneWay);
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => {
      server.off("error", reject);
      resolveListen();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () =>
      new Promise<void>((resolveClose) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolveClose());
      }),
  };
}

export interface DelayProxyProcess {
  /** "127.0.0.1:PORT" */
  host: string;
  port: number;
  delayMs: number;
  child: ChildProcess;
  pid: number;
  /** SIGTERM by PID (SIGKILL after 5 s), waiting for the exit. Idempotent. */
  stop(): Promise<void>;
}

const SCRIPT = fileURLToPath(import.meta.url);
const START_TIMEOUT_MS = 10_000;

/** Starts this file as a child process in front of `target`; resolves once it listens. */
export async function startDelayProxy(target: DelayProxyTarget, roundTripDelayMs: number): Promise<DelayProxyProcess> {
  const child = spawn(process.execPath, [SCRIPT, "--target", `${target.host}:${target.port}`, "--delay-ms", String(roundTripDelayMs)], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8");
  child.stderr!.on("data", (s: string) => {
    if (stderr.length < 16 * 1024) stderr += s;
  });
  const exited = new Promise<void>((resolveExit) => {
    child.once("exit", () => resolveExit());
    child.once("error", (err) => {
      stderr += `spawn failed: ${err.message}\n`;
      resolveExit();
    });
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  const stop = async () => {
    if (!running()) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };
  const lines = createInterface({ input: child.stdout! });
  let timer: NodeJS.Timeout | undefined;
  try {
    const port = await Promise.race([
      new Promise<number>((resolvePort, reject) => {
        lines.once("line", (line) => {
          const parsed = JSON.parse(line) as { port?: unknown };
          if (typeof parsed.port === "number") resolvePort(parsed.port);
          else reject(new Error(`delay proxy printed ${line}`));
        });
      }),
      exited.then(() => Promise.reject(new Error(`delay proxy exited before it listened: ${stderr.trim()}`))),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`delay proxy not listening within ${START_TIMEOUT_MS / 1000} s`)), START_TIMEOUT_MS);
      }),
    ]);
    return { host: `127.0.0.1:${port}`, port, delayMs: roundTripDelayMs, child, pid: child.pid!, stop };
  } catch (e) {
    await stop();
    throw e;
  } finally {
    clearTimeout(timer);
    lines.close();
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { target: { type: "string" }, "delay-ms": { type: "string" } }, strict: true });
  const m = /^(.+):(\d+)$/.exec(values.target ?? "");
  const delayMs = Number(values["delay-ms"]);
  if (!m || !Number.isFinite(delayMs) || delayMs < 0) {
    process.stderr.write("usage: delay-proxy.ts --target HOST:PORT --delay-ms MS\n");
    process.exit(2);
  }
  const proxy = await createDelayProxy({ host: m[1]!, port: Number(m[2]) }, delayMs);
  process.stdout.write(`${JSON.stringify({ port: proxy.port })}\n`);
  const stop = () => void proxy.close().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  process.stdin.on("end", stop);
  process.stdin.on("error", stop);
  process.stdin.resume();
}
