// Runs the real `imprimatur node-proxy` command as a child process, as a node's service manager would, and speaks
// CRI to it (raw bytes, both packages) for tests and benchmarks.
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LIST_ALL_IMAGES_REQUEST } from "../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";
import { liveChildren, installExitHooks } from "./child-cleanup.ts";
import { freePort } from "./ports.ts";

const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));

export interface NodeProxyProcess {
  pid: number;
  /** "unix://…": what the kubelet's --image-service-endpoint names. */
  endpoint: string;
  metricsUrl: string;
  stateDir: string;
  log(): Promise<string>;
  /** A Prometheus sample's value (0 when absent), e.g. metric('imprimatur_node_pulls_total{result="forwarded-ok"}'). */
  metric(sample: string): Promise<number>;
  /** SIGTERM, and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL: no chance to clean up (the records must survive it). */
  kill9(): Promise<void>;
}

export interface NodeProxyStart {
  /** Where the socket goes (a folder of the test's). */
  dir: string;
  stateDir: string;
  runtimeEndpoint: string;
  /** More flags: --verification-policy, --preloaded-allowlist. */
  args?: string[];
}

export async function startNodeProxy(o: NodeProxyStart): Promise<NodeProxyProcess> {
  installExitHooks();
  const socket = join(o.dir, "image-proxy.sock");
  const endpoint = `unix://${socket}`;
  const port = await freePort();
  const logPath = join(o.dir, `node-proxy-${Date.now()}.log`);
  const out = createWriteStream(logPath, { flags: "a" });
  const child: ChildProcess = spawn(
    process.execPath,
    [
      BIN,
      "node-proxy",
      "--listen",
      endpoint,
      "--runtime-endpoint",
      o.runtimeEndpoint,
      "--state-dir",
      o.stateDir,
      "--metrics-address",
      `127.0.0.1:${port}`,
      ...(o.args ?? []),
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, IMPRIMATUR_LOG_LEVEL: "debug" } },
  );
  liveChildren.add(child);
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const exited = new Promise<void>((resolve) =>
    child.once("exit", () => {
      liveChildren.delete(child);
      resolve();
    }),
  );
  const log = () => readFile(logPath, "utf8").catch(() => "");
  const probe = new RuntimeImageClient(endpoint);
  try {
    for (const deadline = Date.now() + 20_000; ;) {
      if (child.exitCode !== null) throw new Error(`node-proxy exited with ${child.exitCode}: ${await log()}`);
      try {
        await probe.call("runtime.v1", "ListImages", LIST_ALL_IMAGES_REQUEST, { deadline: Date.now() + 1_000 });
        break;
      } catch {
        if (Date.now() > deadline) throw new Error(`node-proxy did not answer: ${await log()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } catch (e) {
    child.kill("SIGKILL");
    throw e;
  } finally {
    probe.close();
  }
  const metricsUrl = `http://127.0.0.1:${port}/metrics`;
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
    out.end();
  };
  return {
    pid: child.pid!,
    endpoint,
    metricsUrl,
    stateDir: o.stateDir,
    log,
    metric: async (sample) => {
      const text = await (await fetch(metricsUrl)).text();
      const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
      return line ? Number(line.slice(sample.length + 1)) : 0;
    },
    stop: () => end("SIGTERM"),
    kill9: () => end("SIGKILL"),
  };
}
