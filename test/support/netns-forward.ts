// A TCP port on the host's loopback, made reachable at the same address (127.0.0.1:PORT) inside a network
// namespace: how the small cluster's containerd, inside its namespace, pulls from a test registry that
// registry.ts started on the host's loopback, with the registry's certificate (issued for 127.0.0.1) still valid.
//
// A process lives in one network namespace, so the relay has two halves joined by a Unix socket (Unix sockets
// are files, seen from every network namespace): a listener inside the namespace (a small Node script under
// nsenter) that hands each connection to the socket, and, in the test process, the socket's server that opens
// the matching connection to the host port. Nothing listens anywhere but on loopbacks and that socket.

import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createConnection, createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { liveChildren } from "./child-cleanup.ts";
import { inNetns, nsenterPath } from "./netns.ts";

export interface NetnsForward {
  port: number;
  /** The relay's process inside the namespace. */
  pid: number;
  /** Stops both halves (by PID) and closes every relayed connection. Idempotent. */
  stop(): Promise<void>;
}

const READY_DEADLINE_MS = 15_000;

// Listens on 127.0.0.1:PORT inside the namespace; each connection is piped to the Unix socket. Says "ready".
const INSIDE_SCRIPT = `
const net = require("node:net");
const [socketPath, port] = process.argv.slice(-2);
const server = net.createServer((inner) => {
  const outer = net.createConnection(socketPath);
  const close = () => { inner.destroy(); outer.destroy(); };
  inner.on("error", close); outer.on("error", close); inner.on("close", close); outer.on("close", close);
  inner.pipe(outer); outer.pipe(inner);
});
server.listen({ host: "127.0.0.1", port: Number(port), exclusive: true }, () => process.stdout.write("ready\\n"));
process.on("SIGTERM", () => process.exit(0));
`;

function pipeBoth(a: Socket, b: Socket, open: Set<Socket>): void {
  open.add(a);
  open.add(b);
  const close = () => {
    a.destroy();
    b.destroy();
    open.delete(a);
    open.delete(b);
  };
  for (const s of [a, b]) {
    s.on("error", close);
    s.on("close", close);
  }
  a.pipe(b);
  b.pipe(a);
}

/** Relays 127.0.0.1:port inside `netns` to 127.0.0.1:port of the host; `dir` holds the Unix socket. */
export async function forwardIntoNetns(netns: string, port: number, dir: string): Promise<NetnsForward> {
  const socketPath = join(dir, `forward-${port}.sock`);
  const open = new Set<Socket>();
  const server: Server = createServer((fromInside) => pipeBoth(fromInside, createConnection({ host: "127.0.0.1", port }), open));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  });

  const child: ChildProcess = spawn(nsenterPath(), inNetns(netns, process.execPath, ["-e", INSIDE_SCRIPT, socketPath, String(port)]), {
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) {
    server.close();
    throw new Error("could not start the namespace half of the port relay");
  }
  liveChildren.add(child);
  let output = "";
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exit.then(() => {
    exited = true;
    liveChildren.delete(child);
  });
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (!exited) {
        try {
          process.kill(child.pid!, "SIGTERM");
        } catch {
          // already gone
        }
        await exit;
      }
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    })();
    return stopping;
  };

  const deadline = Date.now() + READY_DEADLINE_MS;
  while (!output.includes("ready\n")) {
    if (exited || Date.now() > deadline) {
      await stop();
      throw new Error(`the relay of port ${port} into network namespace ${netns} did not start: ${output.trim() || "(no output)"}`);
    }
    await sleep(20);
  }
  return { port, pid: child.pid, stop };
}
