// End-to-end harness: real OCI registries (docker-registry, i.e. CNCF distribution 2.8) on 127.0.0.1.
//
// Each registry is one child process with a private temp dir (filesystem storage, generated config, TLS
// material, htpasswd file, skopeo auth file, log) that stop() removes. Three auth modes:
//   none     — anyone may pull and push;
//   htpasswd — every request needs Basic credentials of a listed user (all users may pull and push everything);
//   token    — Bearer tokens from the tests' own token server (token-server.ts), with per-user repository access.
// TLS (default) uses a fresh test CA per registry; the token server's certificates come from the same CA.
// The components come from scripts/provision-registry.sh; images are pushed with skopeo from OCI layouts
// (oci-layout.ts).

import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { RegistrySettings } from "../../src/registry/registry-settings.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { freePort } from "./ports.ts";
import { startTokenServer } from "./token-server.ts";
import type { TestTokenServer, TokenServerUser } from "./token-server.ts";
import { installExitHooks, liveChildren, liveDirs } from "./child-cleanup.ts";
import { runCommand, type CommandOutput } from "./command.ts";
import { tailFile } from "./log-tail.ts";
import { describeExit, followExit, terminate } from "./logged-process.ts";
import { findCommand } from "./executables.ts";
import { recordPrivateKey, recordSecret } from "./secret-ledger.ts";

export type RegistryAuth = "none" | "htpasswd" | "token";

export interface RegistryUser {
  username: string;
  password: string;
  /** Token auth only: repository globs the user may pull (`*` one segment, `**` any). Default: all. */
  pull?: string[];
  /** Token auth only: may push what it may pull. Default true. */
  push?: boolean;
}

export interface RegistryOptions {
  auth: RegistryAuth;
  /** Serve HTTPS with a certificate from a fresh test CA. Default true. */
  tls?: boolean;
  /** Token auth: repository globs anyone may pull anonymously. */
  publicRepositories?: string[];
  /** Default: one generated user that may pull and push everything. */
  users?: RegistryUser[];
  /** Token auth: lifetime of issued tokens (default 300 s). */
  tokenTtlSeconds?: number;
}

export type SkopeoResult = CommandOutput;

export interface TestRegistry {
  /** "127.0.0.1:PORT" */
  host: string;
  /** "https://127.0.0.1:PORT" (http:// with tls: false) */
  url: string;
  /** The test CA: it signed the serving certificate and the token server's certificates. */
  caPem: string;
  /** Path of caPem. */
  caFile: string;
  /** A directory holding only ca.crt, for skopeo --src-cert-dir / --dest-cert-dir / --cert-dir. */
  certDir: string;
  /** The first user; it may pull and push everything (unless its pull globs say otherwise). */
  username: string;
  password: string;
  users: RegistryUser[];
  auth: RegistryAuth;
  tls: boolean;
  /** containers-auth.json / docker config.json with the first user's credentials for this host. */
  authFile: string;
  /** The private temp dir (removed by stop()). */
  dir: string;
  pid: number;
  tokenServer?: TestTokenServer;
  /** skopeo copy --all --preserve-digests from an OCI layout to host/repository:tag, as the first user. */
  push(layoutDir: string, layoutTag: string, repository: string, tag: string): Promise<void>;
  /** skopeo inspect --raw of repository:tag (or repository@digest when ref is a digest), as the first user. */
  inspectRaw(repository: string, ref: string): Promise<{ raw: Buffer; digest: string }>;
  /** The skopeo flags that reach this registry with the first user's credentials and the test CA. */
  skopeoFlags(role: "src" | "dest" | "inspect"): string[];
  /** Tail of the registry's output, for assertion messages. */
  logs(): string;
  /** Every request the registry has answered so far, from its access log, oldest first. */
  accessLog(): RegistryAccess[];
  /**
   * The registry settings a client needs for this registry on 127.0.0.1: its CA, and allowLocalAddresses (the client
   * refuses loopback addresses otherwise), for the registry and, with token auth, for its token server.
   */
  settings(): RegistrySettings[];
  /** The same as `registries:` entries of a RegistryConfig file (the CA by its path). */
  configEntries(): Array<{ host: string; ca: string; allowLocalAddresses: true }>;
  /** A whole RegistryConfig file (JSON, which is YAML) listing only this registry's configEntries(). */
  registryConfig(): string;
  /** SIGTERM (by PID; SIGKILL after a grace period), stop the token server, remove the dir. Idempotent. */
  stop(): Promise<void>;
}

/** One line of the registry's access log. */
export interface RegistryAccess {
  method: string;
  /** Path and query as requested: "/v2/team/app/manifests/1.0". */
  path: string;
  status: number;
}

export interface RegistryToolPaths {
  registry: string;
  skopeo: string;
  htpasswd: string;
}

const START_DEADLINE_MS = 15_000;
const STOP_GRACE_MS = 5_000;
const SKOPEO_TIMEOUT_MS = 60_000;
const PORT_ATTEMPTS = 5;
const TOKEN_SERVICE = "imprimatur-test-registry";
const TOKEN_ISSUER = "imprimatur-test-token-issuer";

// ---------------------------------------------------------------------------------------------
// Tool discovery

/** docker-registry, skopeo and htpasswd; throws, naming what is missing, if provision-registry.sh has not run. */
export function registryToolPaths(): RegistryToolPaths {
  const found = { registry: findCommand("docker-registry"), skopeo: findCommand("skopeo"), htpasswd: findCommand("htpasswd") };
  const missing = Object.entries(found)
    .filter(([, path]) => path === null)
    .map(([name]) => (name === "registry" ? "docker-registry" : name));
  if (missing.length > 0) {
    throw new Error(
      `registry test components not found: ${missing.join(", ")}. Run scripts/provision-registry.sh first ` +
        `(it installs Debian's docker-registry, skopeo and apache2-utils).`,
    );
  }
  return found as RegistryToolPaths;
}

// ---------------------------------------------------------------------------------------------
// Child processes, and killing them if the test process dies first

/** The test process's environment minus what would reconfigure the children behind our back. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    // docker-registry overrides any config field from REGISTRY_* variables; skopeo reads REGISTRY_AUTH_FILE.
    if (key.startsWith("REGISTRY_")) continue;
    if (key === "DOCKER_CONFIG" || key === "CONTAINERS_REGISTRIES_CONF") continue;
    env[key] = value;
  }
  return { ...env, ...extra };
}

interface RegistryProcess {
  child: ChildProcess;
  pid: number;
  logPath: string;
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  exited: Promise<void>;
}

function spawnRegistry(bin: string, configPath: string, logPath: string, dir: string): RegistryProcess {
  // stdout and stderr share one file, so the log keeps its order.
  const log = openSync(logPath, "w");
  let child: ChildProcess;
  try {
    child = spawn(bin, ["serve", configPath], { cwd: dir, env: childEnv(), stdio: ["ignore", log, log] });
  } finally {
    closeSync(log);
  }
  if (child.pid === undefined) throw new Error(`could not start ${bin}`);
  liveChildren.add(child);
  return followExit<RegistryProcess>({ child, pid: child.pid, logPath, exit: null, exited: Promise.resolve() });
}

/** Runs a command, collecting its output; never rejects (a spawn failure or timeout gives code -1). */
function run(bin: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<SkopeoResult> {
  // Only the subcommand in the label: the rest may hold credentials.
  return runCommand(bin, args, {
    env: opts.env ?? childEnv(),
    timeoutMs: opts.timeoutMs ?? SKOPEO_TIMEOUT_MS,
    label: `[registry] ${bin} ${args[0] ?? ""}`,
    input: opts.input,
  });
}

/** Runs skopeo with the harness's environment (no REGISTRY_AUTH_FILE etc. from the caller). */
export function runSkopeo(args: string[], opts: { timeoutMs?: number } = {}): Promise<SkopeoResult> {
  return run(registryToolPaths().skopeo, args, opts);
}

// ---------------------------------------------------------------------------------------------
// Readiness

/** Any HTTP answer from /v2/ (200 without auth, 401 with) means the registry serves. */
function probeV2(url: string, ca: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = url.startsWith("https:") ? httpsRequest : httpRequest;
    const req = request(`${url}/v2/`, { method: "GET", ca, agent: false, timeout: 1_000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------
// Configuration

interface RegistryFiles {
  storage: string;
  tlsCert: string;
  tlsKey: string;
  caFile: string;
  htpasswd: string;
}

/** The registry's config. JSON is valid YAML, and sidesteps quoting. */
export function registryConfig(
  port: number,
  files: RegistryFiles,
  opts: { auth: RegistryAuth; tls: boolean; secret: string; token?: { realm: string; service: string; issuer: string } },
): string {
  let auth: Record<string, unknown> | undefined;
  if (opts.auth === "htpasswd") auth = { htpasswd: { realm: "imprimatur-test-registry", path: files.htpasswd } };
  if (opts.auth === "token") {
    if (opts.token === undefined) throw new Error("token auth needs the token server's realm, service and issuer");
    auth = { token: { ...opts.token, rootcertbundle: files.caFile } };
  }
  const config = {
    version: "0.1",
    log: { level: "info", formatter: "text", fields: { service: "registry" } },
    storage: {
      filesystem: { rootdirectory: files.storage },
      delete: { enabled: true },
      maintenance: { uploadpurging: { enabled: false } },
    },
    http: {
      addr: `127.0.0.1:${port}`,
      secret: opts.secret,
      ...(opts.tls ? { tls: { certificate: files.tlsCert, key: files.tlsKey } } : {}),
    },
    ...(auth !== undefined ? { auth } : {}),
    health: { storagedriver: { enabled: false } },
  };
  return JSON.stringify(config, null, 2) + "\n";
}

// docker-registry's access log: `127.0.0.1 - - [date] "GET /v2/ HTTP/1.1" 401 87 "" ""`, one line per answer.
const ACCESS_LINE = /^\S+ - \S+ \[[^\]]*\] "([A-Z]+) (\S+) HTTP\/[\d.]+" (\d{3}) /;

export function parseAccessLog(log: string): RegistryAccess[] {
  return log.split("\n").flatMap((line) => {
    const m = ACCESS_LINE.exec(line);
    return m ? [{ method: m[1]!, path: m[2]!, status: Number(m[3]) }] : [];
  });
}

/** A docker config.json / containers auth.json granting `user` on `host`. */
export function authFileJson(host: string, user: { username: string; password: string }): string {
  return JSON.stringify({ auths: { [host]: { auth: Buffer.from(`${user.username}:${user.password}`).toString("base64") } } }) + "\n";
}

async function writeHtpasswd(htpasswdBin: string, path: string, users: RegistryUser[]): Promise<void> {
  const lines: string[] = [];
  for (const user of users) {
    if (user.username.includes(":")) throw new Error(`htpasswd user names cannot contain ':' (${JSON.stringify(user.username)})`);
    // -i reads the password from stdin, so it never appears on a command line.
    const result = await run(htpasswdBin, ["-niB", user.username], { input: `${user.password}\n`, timeoutMs: 10_000 });
    if (result.code !== 0) throw new Error(`htpasswd failed for user ${user.username} (code ${result.code}): ${result.stderr.trim()}`);
    lines.push(result.stdout.toString("utf8").trim());
  }
  writeFileSync(path, lines.join("\n") + "\n", { mode: 0o600 });
}

// ---------------------------------------------------------------------------------------------
// Start

export async function startRegistry(opts: RegistryOptions): Promise<TestRegistry> {
  const tools = registryToolPaths();
  const tls = opts.tls ?? true;
  const users: RegistryUser[] =
    opts.users && opts.users.length > 0 ? opts.users.map((u) => ({ ...u })) : [{ username: "imprimatur-test", password: randomBytes(12).toString("hex") }];
  const first = users[0]!;
  for (const user of users) {
    recordSecret("a registry password", user.password);
    recordSecret("a registry Basic credential", Buffer.from(`${user.username}:${user.password}`).toString("base64"));
  }
  installExitHooks();

  const dir = mkdtempSync(join(tmpdir(), "imprimatur-registry-"));
  liveDirs.add(dir);
  let tokenServer: TestTokenServer | undefined;
  let proc: RegistryProcess | undefined;

  const abandon = async (error: Error): Promise<never> => {
    if (proc) await terminate(proc, STOP_GRACE_MS);
    if (tokenServer) await tokenServer.stop();
    liveDirs.delete(dir);
    rmSync(dir, { recursive: true, force: true });
    throw error;
  };

  try {
    const deadline = Date.now() + START_DEADLINE_MS;
    const ca = await createCertificateAuthority(`imprimatur-test-registry-ca@${process.pid}`);
    const serving = await issueCertificate(ca, { commonName: "imprimatur-test-registry", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1", "::1"] });
    recordPrivateKey(ca.keyPem, "a registry's CA key");
    recordPrivateKey(serving.keyPem, "a registry's TLS key");
    const files: RegistryFiles = {
      storage: join(dir, "storage"),
      tlsCert: join(dir, "tls.crt"),
      tlsKey: join(dir, "tls.key"),
      caFile: join(dir, "ca.crt"),
      htpasswd: join(dir, "htpasswd"),
    };
    const certDir = join(dir, "certs.d");
    const skopeoTmp = join(dir, "tmp");
    for (const sub of [files.storage, certDir, skopeoTmp]) mkdirSync(sub, { recursive: true });
    writeFileSync(files.caFile, ca.certPem);
    writeFileSync(join(certDir, "ca.crt"), ca.certPem);
    writeFileSync(files.tlsCert, serving.certPem);
    writeFileSync(files.tlsKey, serving.keyPem, { mode: 0o600 });
    if (opts.auth === "htpasswd") await writeHtpasswd(tools.htpasswd, files.htpasswd, users);
    if (opts.auth === "token") {
      const tokenUsers: TokenServerUser[] = users.map((u) => ({ ...u }));
      tokenServer = await startTokenServer({
        ca,
        service: TOKEN_SERVICE,
        issuer: TOKEN_ISSUER,
        users: tokenUsers,
        publicRepositories: opts.publicRepositories ?? [],
        ...(opts.tokenTtlSeconds !== undefined ? { tokenTtlSeconds: opts.tokenTtlSeconds } : {}),
      });
    }
    const secret = randomBytes(16).toString("hex");
    const configPath = join(dir, "config.yml");
    const logPath = join(dir, "registry.log");
    const authFile = join(dir, "auth.json");

    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const host = `127.0.0.1:${port}`;
      const url = `${tls ? "https" : "http"}://${host}`;
      const token = tokenServer ? { realm: tokenServer.realm, service: TOKEN_SERVICE, issuer: TOKEN_ISSUER } : undefined;
      writeFileSync(configPath, registryConfig(port, files, { auth: opts.auth, tls, secret, ...(token ? { token } : {}) }));
      writeFileSync(authFile, authFileJson(host, first), { mode: 0o600 });
      proc = spawnRegistry(tools.registry, configPath, logPath, dir);
      const current = proc;
      let lastState = "no response yet";
      while (!current.exit) {
        try {
          const status = await probeV2(url, ca.certPem);
          // The log line rules out another process that grabbed the port first answering in our place.
          if ((status === 200 || status === 401) && readFileSync(logPath, "utf8").includes(`listening on ${host}`)) {
            return makeRegistry({
              tools,
              dir,
              host,
              url,
              tls,
              auth: opts.auth,
              users,
              caPem: ca.certPem,
              caFile: files.caFile,
              certDir,
              authFile,
              skopeoTmp,
              proc: current,
              tokenServer,
            });
          }
          lastState = `/v2/ answered ${status}`;
        } catch (err) {
          lastState = `/v2/: ${(err as Error).message}`;
        }
        if (Date.now() > deadline) {
          return await abandon(new Error(`docker-registry not ready within ${START_DEADLINE_MS / 1000} s (${lastState}); log tail:\n${tailFile(logPath)}`));
        }
        await sleep(20);
      }
      const log = tailFile(logPath);
      if (attempt < PORT_ATTEMPTS && /address already in use/i.test(log)) continue;
      return await abandon(new Error(`docker-registry exited (${describeExit(current)}) during start; log tail:\n${log}`));
    }
  } catch (err) {
    if (liveDirs.has(dir)) return await abandon(err as Error);
    throw err;
  }
}

function makeRegistry(parts: {
  tools: RegistryToolPaths;
  dir: string;
  host: string;
  url: string;
  tls: boolean;
  auth: RegistryAuth;
  users: RegistryUser[];
  caPem: string;
  caFile: string;
  certDir: string;
  authFile: string;
  skopeoTmp: string;
  proc: RegistryProcess;
  tokenServer: TestTokenServer | undefined;
}): TestRegistry {
  const { tools, dir, host, proc, tokenServer } = parts;
  const first = parts.users[0]!;
  let stopping: Promise<void> | undefined;

  // The hosts a client contacts: the registry and, with token auth, the token server it names as its realm.
  const localHosts = () => [host, ...(tokenServer ? [new URL(tokenServer.url).host] : [])];
  const configEntries = () => localHosts().map((h) => ({ host: h, ca: parts.caFile, allowLocalAddresses: true as const }));
  const skopeoFlags = (role: "src" | "dest" | "inspect"): string[] => {
    const prefix = role === "inspect" ? "" : `${role}-`;
    return [`--${prefix}authfile`, parts.authFile, `--${prefix}cert-dir`, parts.certDir, `--${prefix}tls-verify=${parts.tls}`];
  };
  const skopeo = (args: string[]) => run(tools.skopeo, ["--insecure-policy", "--tmpdir", parts.skopeoTmp, ...args]);
  const failure = (what: string, result: SkopeoResult) =>
    new Error(`${what} failed (skopeo exit ${result.code}): ${result.stderr.trim()}\nregistry log tail:\n${tailFile(proc.logPath, 20)}`);

  const registry: TestRegistry = {
    host,
    url: parts.url,
    caPem: parts.caPem,
    caFile: parts.caFile,
    certDir: parts.certDir,
    username: first.username,
    password: first.password,
    users: parts.users,
    auth: parts.auth,
    tls: parts.tls,
    authFile: parts.authFile,
    dir,
    pid: proc.pid,
    skopeoFlags,
    push: async (layoutDir, layoutTag, repository, tag) => {
      // --all copies every instance of an index (and is harmless for a single manifest); --preserve-digests makes
      // skopeo fail rather than silently convert, so the pushed digest is the one computed locally.
      const result = await skopeo([
        "copy",
        "--quiet",
        "--all",
        "--preserve-digests",
        ...skopeoFlags("dest"),
        `oci:${layoutDir}:${layoutTag}`,
        `docker://${host}/${repository}:${tag}`,
      ]);
      if (result.code !== 0) throw failure(`push of ${layoutDir}:${layoutTag} to ${host}/${repository}:${tag}`, result);
    },
    inspectRaw: async (repository, ref) => {
      const target = ref.includes(":") ? `${host}/${repository}@${ref}` : `${host}/${repository}:${ref}`;
      const result = await skopeo(["inspect", "--raw", ...skopeoFlags("inspect"), `docker://${target}`]);
      if (result.code !== 0) throw failure(`skopeo inspect --raw docker://${target}`, result);
      return { raw: result.stdout, digest: `sha256:${createHash("sha256").update(result.stdout).digest("hex")}` };
    },
    logs: () => tailFile(proc.logPath),
    accessLog: () => parseAccessLog(readFileSync(proc.logPath, "utf8")),
    settings: () => localHosts().map((h) => ({ host: h, ca: parts.caPem, allowLocalAddresses: true })),
    configEntries,
    registryConfig: () => JSON.stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "RegistryConfig", registries: configEntries() }),
    stop: () => {
      stopping ??= (async () => {
        await terminate(proc, STOP_GRACE_MS);
        if (tokenServer) await tokenServer.stop();
        liveDirs.delete(dir);
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
  if (tokenServer) registry.tokenServer = tokenServer;
  return registry;
}
