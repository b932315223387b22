// The bare gRPC forwarder (grpc-forwarder.ts) as a child process, for the benchmarks that compare the node proxy
// against the floor of any Node gRPC hop.
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { LIST_ALL_IMAGES_REQUEST } from "../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";

const FORWARDER = fileURLToPath(new URL("./grpc-forwarder.ts", import.meta.url));

export interface Forwarder {
  pid: number;
  endpoint: string;
  stop(): Promise<void>;
}

/** bench/support/grpc-forwarder.ts as a child process, ready once a ListImages through it is answered. */
export async function startForwarder(socket: string, runtimeEndpoint: string): Promise<Forwarder> {
  const endpoint = `unix://${socket}`;
  const child = spawn(process.execPath, [FORWARDER, "--listen", endpoint, "--runtime-endpoint", runtimeEndpoint], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const probe = new RuntimeImageClient(endpoint);
  try {
    for (const deadline = Date.now() + 20_000; ;) {
      if (child.exitCode !== null) throw new Error(`grpc-forwarder exited with ${child.exitCode}: ${stderr}`);
      try {
        await probe.call("runtime.v1", "ListImages", LIST_ALL_IMAGES_REQUEST, { deadline: Date.now() + 1_000 });
        break;
      } catch {
        if (Date.now() > deadline) throw new Error(`grpc-forwarder did not answer: ${stderr}`);
        await sleep(50);
      }
    }
  } catch (e) {
    await stop();
    throw e;
  } finally {
    probe.close();
  }
  return { pid: child.pid!, endpoint, stop };
}
