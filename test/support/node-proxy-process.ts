// Runs the real `imprimatur node-proxy` command as a child process, as a node's service manager would, and speaks
// CRI to it (raw bytes, both packages) for tests and benchmarks. startNodeProxyFromUnit runs it as systemd would
// run the shipped unit: the unit's ExecStart, expanded with its EnvironmentFile, the bundle's own node and app
// (systemd itself is not needed: the unit's other lines are systemd's business, and a unit test reads them).
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, readdirSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LIST_ALL_IMAGES_REQUEST } from "../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";
import { liveChildren, installExitHooks } from "./child-cleanup.ts";
import { freePort } from "./ports.ts";
import { scanOutputsBeforeRemoval } from "./secret-ledger.ts";

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

/** The flags every start here uses: a socket in the test's folder, its state folder, metrics on a free port. */
async function baseFlags(o: NodeProxyStart): Promise<{ endpoint: string; port: number; flags: string[] }> {
  const endpoint = `unix://${join(o.dir, "image-proxy.sock")}`;
  const port = await freePort();
  const flags = ["--listen", endpoint, "--runtime-endpoint", o.runtimeEndpoint, "--state-dir", o.stateDir, "--metrics-address", `127.0.0.1:${port}`];
  return { endpoint, port, flags: [...flags, ...(o.args ?? [])] };
}

export async function startNodeProxy(o: NodeProxyStart): Promise<NodeProxyProcess> {
  const { endpoint, port, flags } = await baseFlags(o);
  return launch(o, process.execPath, [BIN, "node-proxy", ...flags], { ...process.env, IMPRIMATUR_LOG_LEVEL: "debug" }, endpoint, port);
}

export interface UnitStart extends NodeProxyStart {
  /** The bundle's folder (scripts/build-node-bundle.ts), where the unit says /opt/imprimatur. */
  bundle: string;
  /** The unit file (default: the shipped deploy/node-proxy/host/imprimatur-node-proxy.service). */
  unitFile?: string;
}

export const SHIPPED_UNIT = fileURLToPath(new URL("../../deploy/node-proxy/host/imprimatur-node-proxy.service", import.meta.url));
/** Where the shipped unit expects the bundle and its environment file on a node. */
const NODE_PATHS = { bundle: "/opt/imprimatur", envFile: "/etc/imprimatur/node-proxy.env" };

/**
 * Writes this start's environment file (the flags in IMPRIMATUR_NODE_PROXY_ARGS, as the shipped example does)
 * and runs the unit's ExecStart with it. Resolves once the proxy answers CRI; rejects when it exits first (the
 * message holds its output).
 */
export async function startNodeProxyFromUnit(o: UnitStart): Promise<NodeProxyProcess> {
  const { endpoint, port, flags } = await baseFlags(o);
  const envFile = join(o.dir, "node-proxy.env");
  await writeFile(
    envFile,
    `# written by the test, as an operator writes /etc/imprimatur/node-proxy.env\nIMPRIMATUR_NODE_PROXY_ARGS=${flags.join(" ")}\nIMPRIMATUR_LOG_LEVEL=debug\n`,
  );
  const { argv, env } = await unitCommand(await readFile(o.unitFile ?? SHIPPED_UNIT, "utf8"), (path) =>
    path === NODE_PATHS.envFile ? envFile : path.replace(/^\/opt\/imprimatur(?=\/|$)/, o.bundle),
  );
  return launch(o, argv[0]!, argv.slice(1), env, endpoint, port);
}

/** The unit's command and environment as systemd would run it, with node paths mapped by `where`. */
export async function unitCommand(unitText: string, where: (path: string) => string): Promise<{ argv: string[]; env: Record<string, string> }> {
  const service = parseUnit(unitText).get("Service") ?? new Map<string, string[]>();
  const exec = service.get("ExecStart") ?? [];
  if (exec.length !== 1) throw new Error(`the unit must have one ExecStart, found ${exec.length}`);
  // systemd starts services with a clean environment: its default PATH and the unit's variables only.
  const env: Record<string, string> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" };
  for (const entry of service.get("EnvironmentFile") ?? []) {
    const optional = entry.startsWith("-");
    const file = where(optional ? entry.slice(1) : entry);
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (e) {
      if (optional && (e as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw e;
    }
    Object.assign(env, parseEnvironmentFile(text));
  }
  const argv = expandCommand(exec[0]!, env).map((word, i) => (i === 0 ? where(word) : word.startsWith("/") ? where(word) : word));
  return { argv, env };
}

/** A unit file's sections: name → key → values in order (comments, blank lines and continuations handled). */
export function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let section: Map<string, string[]> | undefined;
  for (const line of joinContinuations(text)) {
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#") || trimmed.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(trimmed);
    if (header) {
      section = sections.get(header[1]!) ?? new Map();
      sections.set(header[1]!, section);
      continue;
    }
    const eq = trimmed.indexOf("=");
    if (!section || eq < 1) throw new Error(`not a unit line: ${line}`);
    const key = trimmed.slice(0, eq).trim();
    section.set(key, [...(section.get(key) ?? []), trimmed.slice(eq + 1).trim()]);
  }
  return sections;
}

/** systemd's EnvironmentFile: KEY=VALUE lines, # and ; comments, a value optionally in one pair of quotes. */
export function parseEnvironmentFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of joinContinuations(text)) {
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#") || trimmed.startsWith(";")) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(trimmed);
    if (!m) throw new Error(`not an environment line: ${line}`);
    const value = m[2]!;
    env[m[1]!] = /^(["']).*\1$/.test(value) ? value.slice(1, -1) : value;
  }
  return env;
}

/**
 * systemd's ExecStart: words split on spaces, with quotes; a word that is exactly $NAME becomes the variable's
 * words (none when empty or unset), ${NAME} is replaced within its word, $$ is a $. No prefix ("-", "@", "+",
 * "!") is supported: the shipped unit uses none.
 */
export function expandCommand(line: string, env: Readonly<Record<string, string>>): string[] {
  if (/^[-@+!:]/.test(line)) throw new Error(`ExecStart prefixes are not supported here: ${line}`);
  const out: string[] = [];
  for (const { word, quoted } of splitWords(line)) {
    const whole = /^\$([A-Za-z_][A-Za-z0-9_]*)$/.exec(word);
    if (whole && !quoted) {
      out.push(...(env[whole[1]!] ?? "").split(/\s+/).filter((w) => w !== ""));
      continue;
    }
    out.push(word.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (m, name: string | undefined) => (m === "$$" ? "$" : (env[name!] ?? ""))));
  }
  return out;
}

function splitWords(line: string): Array<{ word: string; quoted: boolean }> {
  const words: Array<{ word: string; quoted: boolean }> = [];
  let at = 0;
  while (at < line.length) {
    while (line[at] === " " || line[at] === "\t") at++;
    if (at >= line.length) break;
    let word = "";
    let quoted = false;
    while (at < line.length && line[at] !== " " && line[at] !== "\t") {
      const c = line[at]!;
      if (c === '"' || c === "'") {
        const end = line.indexOf(c, at + 1);
        if (end < 0) throw new Error(`unbalanced quote in ${line}`);
        word += line.slice(at + 1, end);
        quoted = true;
        at = end + 1;
      } else if (c === "\\" && at + 1 < line.length) {
        word += line[at + 1];
        at += 2;
      } else {
        word += c;
        at++;
      }
    }
    words.push({ word, quoted });
  }
  return words;
}

function joinContinuations(text: string): string[] {
  return text.replace(/\\\n/g, " ").split("\n");
}

async function launch(o: NodeProxyStart, command: string, args: string[], env: NodeJS.ProcessEnv, endpoint: string, port: number): Promise<NodeProxyProcess> {
  installExitHooks();
  const logPath = join(o.dir, `node-proxy-${Date.now()}.log`);
  const out = createWriteStream(logPath, { flags: "a" });
  const child: ChildProcess = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env });
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
    await new Promise<void>((resolve) => out.end(() => resolve()));
    // Its log and its records are scanned for the suite's secrets (secret-ledger.ts): the test removes them later.
    const records = ["pulled", "pulling"].flatMap((sub) => filesIn(join(o.stateDir, sub)));
    scanOutputsBeforeRemoval([logPath, ...records], "node-proxy");
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

function filesIn(dir: string): string[] {
  try {
    return readdirSync(dir).map((name) => join(dir, name));
  } catch {
    return [];
  }
}
