// A kubeconfig means the same to kubectl and to Imprimatur (src/kube/kubeconfig-document.ts, kube-connection.ts,
// exec-credentials.ts). For each case of the table, the real kubectl (v1.20, provisioned by
// scripts/provision-kube.sh) is run with KUBECONFIG set to the case's files, from a working directory that holds
// decoys of the relative paths the cases use, and compared with what loadKubeConnection and
// selectKubeconfigContext resolved:
//
// - `kubectl config view --minify --raw -o json [--context C]`: the context kubectl chose and the fields of its
//   cluster, user and context, as written (server, CA data, TLS server name, insecure, proxy URL, namespace,
//   token, basic auth, impersonation, the exec plugin's command, args, env and apiVersion);
// - `... --flatten`: the content of the CA, client certificate and client key files kubectl found, which shows
//   where it resolved each relative path (every candidate location holds different content);
// - `kubectl get --raw /version` against 127.0.0.1:1, where nothing listens: whether kubectl accepts the
//   configuration (it then fails to connect) or refuses it before any request, and the URL it asked (-v=6). An
//   exec plugin runs then, and records how it was run (its path, args, env, KUBERNETES_EXEC_INFO): Imprimatur's
//   run of the same plugin must record the same. When both refuse a missing file, both must name the same path.
//
// Where Imprimatur decides otherwise on purpose, the case says what kubectl does and why (`kubectl:`), so the
// difference is asserted rather than hidden; a kubectl that changes its mind fails the test either way.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { loadKubeConnection, readKubeconfigFile } from "../../../src/kube/kube-connection.ts";
import { mergeKubeconfigs, selectKubeconfigContext, type SelectedKubeconfig } from "../../../src/kube/kubeconfig-document.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";
import { kubeToolPaths } from "../../support/kube-cluster.ts";

/** What a client does with a configuration. */
type Outcome =
  /** Accepts it: kubectl then fails to connect to the (closed) server. */
  | "usable"
  /** Refuses it before any request. */
  | "refused"
  /** kubectl only: talks to its built-in default, http://localhost:8080, as if no kubeconfig had been given. */
  | "default-server"
  /** kubectl only: finds no credentials and asks for a username on its terminal (here: none, so it fails). */
  | "prompts";

type Entries = Record<string, Record<string, unknown>>;

interface Case {
  name: string;
  /** Files of the case, relative to its folder: a kubeconfig (clusters, users, contexts by name) or raw text. */
  files: Record<string, { clusters?: Entries; users?: Entries; contexts?: Entries; current?: string } | string>;
  /** The KUBECONFIG list, relative to the case's folder. */
  kubeconfig: string[];
  context?: string;
  /** What Imprimatur does: kubectl does the same unless `kubectl` says otherwise. */
  expect: "usable" | "refused";
  kubectl?: { outcome: Outcome; why: string };
  /** Both refuse a file that does not exist: both must name the same absolute path. */
  missingPath?: boolean;
  /** kubectl asks a URL other than Imprimatur's server, and why. */
  serverDiffers?: string;
  /** An extra PATH entry for both (exec plugins found through PATH). */
  path?: string;
}

const SERVER = "https://127.0.0.1:1";
const V1BETA1 = "client.authentication.k8s.io/v1beta1";

let root: string;
let kubectlBin: string;
const b64 = (text: string) => Buffer.from(text).toString("base64");

// Certificates the cases put in their files: CAs and client key pairs, all different, so that the content kubectl
// found shows which file it read. Made before the cases are, which hold them.
const [caA, caB, caDecoy] = await Promise.all(["A", "B", "decoy"].map((n) => createCertificateAuthority(`differential CA ${n}`)));
const [pairA, pairB, pairDecoy] = await Promise.all(["a", "b", "decoy"].map((n) => issueCertificate(caA!, { commonName: `user-${n}`, client: true })));
const pem = {
  caA: caA!.certPem,
  caB: caB!.certPem,
  caDecoy: caDecoy!.certPem,
  certA: pairA!.certPem,
  keyA: pairA!.keyPem,
  certB: pairB!.certPem,
  keyB: pairB!.keyPem,
  certDecoy: pairDecoy!.certPem,
  keyDecoy: pairDecoy!.keyPem,
};

/** A plugin that records how it was run into $RECORD_DIR and gives a token. */
const PLUGIN = [
  "#!/bin/sh",
  'd="$RECORD_DIR"',
  'printf "%s" "$0" > "$d/argv0"',
  ': > "$d/args"',
  'for a in "$@"; do printf "%s\\n" "$a" >> "$d/args"; done',
  'printf "%s" "${PLUGIN_VAR-unset}" > "$d/var"',
  'printf "%s" "$KUBERNETES_EXEC_INFO" > "$d/info"',
  'printf \'{"apiVersion":"%s","kind":"ExecCredential","status":{"token":"from-plugin"}}\\n\' "${PLUGIN_API_VERSION:-client.authentication.k8s.io/v1beta1}"',
  "",
].join("\n");

function writeExecutable(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
  chmodSync(path, 0o755);
}

before(async () => {
  kubectlBin = kubeToolPaths().kubectl; // throws, naming scripts/provision-kube.sh, when kubectl was not provisioned
  root = await mkdtemp(join(tmpdir(), "imprimatur-kubeconfig-differential-"));
  // kubectl's working directory: a decoy at every relative path a case uses, so resolving against it shows.
  const cwd = join(root, "cwd");
  for (const name of ["ca.crt", "pki/ca.crt"]) {
    mkdirSync(dirname(join(cwd, name)), { recursive: true });
    writeFileSync(join(cwd, name), pem.caDecoy);
  }
  for (const [name, text] of Object.entries({ "u.crt": pem.certDecoy, "u.key": pem.keyDecoy, "certs/u.crt": pem.certDecoy, "certs/u.key": pem.keyDecoy })) {
    mkdirSync(dirname(join(cwd, name)), { recursive: true });
    writeFileSync(join(cwd, name), text);
  }
  writeFileSync(join(cwd, "token"), "decoy-token");
  writeExecutable(join(cwd, "bin", "plugin"), PLUGIN);
  writeExecutable(join(root, "pathbin", "kc-differential-plugin"), PLUGIN);
  writeExecutable(join(root, "decoybin", "kc-differential-plugin"), PLUGIN);
  mkdirSync(join(root, "home"));
});

after(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runKubectl(args: string[], kubeconfig: string[], extraPath?: string): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: join(root, "home"), KUBECONFIG: kubeconfig.join(":") };
  if (extraPath) env.PATH = `${extraPath}:${process.env.PATH ?? ""}`;
  return new Promise((resolve, reject) => {
    // stdin is /dev/null: a kubectl that asks for a username reads EOF and fails.
    const child = spawn(kubectlBin, args, { cwd: join(root, "cwd"), env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") });
    });
  });
}

/** What `kubectl get --raw /version` did: the outcome, the URL it asked (if any), its error. */
function kubectlOutcome(run: Run): { outcome: Outcome; url: string | undefined; message: string } {
  const url = /\] GET (\S+)\/version\?timeout=1s/.exec(run.stderr)?.[1];
  // With -v=6 kubectl's last word is a klog "F" line (then a stack dump).
  const message = /^F\d{4} [^\]]*\] (.*)$/m.exec(run.stderr)?.[1] ?? run.stderr.slice(0, 500);
  let outcome: Outcome = "refused";
  // The prompt goes to stdout.
  if (/Please enter Username/.test(run.stdout)) outcome = "prompts";
  else if (url?.startsWith("http://localhost:8080")) outcome = "default-server";
  else if (url !== undefined && /connect: connection refused|was refused/.test(run.stderr)) outcome = "usable";
  return { outcome, url, message };
}

function caseDir(index: number): string {
  return join(root, "cases", String(index));
}

function writeCase(index: number, c: Case): string[] {
  const base = caseDir(index);
  for (const [name, content] of Object.entries(c.files)) {
    const path = join(base, name);
    mkdirSync(dirname(path), { recursive: true });
    if (typeof content === "string") {
      if (name.endsWith("plugin")) writeExecutable(path, content);
      else writeFileSync(path, content);
      continue;
    }
    const list = (entries: Entries | undefined, key: string) => Object.entries(entries ?? {}).map(([n, body]) => ({ name: n, [key]: body }));
    const doc = {
      apiVersion: "v1",
      kind: "Config",
      clusters: list(content.clusters, "cluster"),
      users: list(content.users, "user"),
      contexts: list(content.contexts, "context"),
      ...(content.current !== undefined ? { "current-context": content.current } : {}),
    };
    // @RECORDS@ stands for the case's records folder, the plugin's RECORD_DIR.
    writeFileSync(path, JSON.stringify(doc).replaceAll("@RECORDS@", join(base, "records")));
  }
  mkdirSync(join(base, "records"), { recursive: true });
  return c.kubeconfig.map((name) => join(base, name));
}

/** How a plugin was run: its path ($0), args (a line each), $PLUGIN_VAR, $KUBERNETES_EXEC_INFO. */
interface PluginRecord {
  argv0: string;
  args: string;
  var: string;
  info: string;
}

/** What the case's exec plugin recorded of its last run, then forgotten. */
function takeRecord(index: number): PluginRecord | undefined {
  const dir = join(caseDir(index), "records");
  if (!existsSync(join(dir, "argv0"))) return undefined;
  const take = (name: keyof PluginRecord) => {
    const text = readFileSync(join(dir, name), "utf8");
    rmSync(join(dir, name));
    return text;
  };
  return { argv0: take("argv0"), args: take("args"), var: take("var"), info: take("info") };
}

/** Imprimatur's verdict: the connection loads, and its exec plugin (if any) gives a credential. */
async function ours(files: string[], c: Case): Promise<{ outcome: "usable" | "refused"; message: string; server?: string }> {
  const savedPath = process.env.PATH;
  if (c.path) process.env.PATH = `${c.path}:${savedPath ?? ""}`;
  try {
    const connection = loadKubeConnection(files.join(":"), c.context ? { context: c.context } : {});
    await connection.exec?.credential();
    return { outcome: "usable", message: "", server: connection.server };
  } catch (e) {
    return { outcome: "refused", message: (e as Error).message };
  } finally {
    if (savedPath === undefined) delete process.env.PATH;
    else process.env.PATH = savedPath;
  }
}

const pluginEnv = (extra: Array<{ name: string; value: string }> = []) => [{ name: "RECORD_DIR", value: "@RECORDS@" }, ...extra];
const ctx = (cluster: string, user: string, namespace?: string) => ({ cluster, user, ...(namespace ? { namespace } : {}) });
/** One cluster "c", one user "u", one context "x" (current). */
const one = (cluster: Record<string, unknown>, user: Record<string, unknown>, more: { namespace?: string } = {}) => ({
  clusters: { c: { server: SERVER, ...cluster } },
  users: { u: user },
  contexts: { x: ctx("c", "u", more.namespace) },
  current: "x",
});

function cases(): Case[] {
  // Three files whose names overlap: which file wins each name, and which current-context, depends on their order.
  const overlapping = {
    "a/config": {
      clusters: { shared: { server: SERVER, "certificate-authority": "ca.crt" } },
      users: { shared: { "client-certificate": "u.crt", "client-key": "u.key" } },
      contexts: { ctxA: ctx("shared", "shared", "from-a") },
    },
    "a/ca.crt": pem.caA,
    "a/u.crt": pem.certA,
    "a/u.key": pem.keyA,
    "b/config": {
      clusters: { shared: { server: "https://127.0.0.2:1" }, onlyB: { server: SERVER, "certificate-authority": "ca.crt", "tls-server-name": "kubernetes" } },
      users: { shared: { token: "from-b" }, onlyB: { token: "b" } },
      contexts: { ctxB: ctx("onlyB", "shared"), ctxA: ctx("onlyB", "onlyB", "from-b") },
      current: "ctxB",
    },
    "b/ca.crt": pem.caB,
    "c/config": { contexts: { ctxC: ctx("shared", "onlyB", "from-c") }, current: "ctxA" },
  };
  return [
    {
      name: "one file: server, inline CA data, TLS server name, namespace, token",
      files: {
        config: one({ "certificate-authority-data": b64(pem.caA), "tls-server-name": "kubernetes.default" }, { token: "sekret" }, { namespace: "shop" }),
      },
      kubeconfig: ["config"],
      expect: "usable",
    },
    {
      name: "three files: the first current-context set wins, and the first file to name an entry",
      files: overlapping,
      kubeconfig: ["a/config", "b/config", "c/config"],
      expect: "usable",
    },
    { name: "three files in another order", files: overlapping, kubeconfig: ["c/config", "b/config", "a/config"], expect: "usable" },
    { name: "three files, --context chooses", files: overlapping, kubeconfig: ["a/config", "b/config", "c/config"], context: "ctxC", expect: "usable" },
    {
      name: "relative CA, client certificate, key and token file, resolved against their own file's folder",
      files: {
        "a/sub/config": one(
          { "certificate-authority": "../../b/pki/ca.crt" },
          { "client-certificate": "certs/u.crt", "client-key": "./certs/u.key", tokenFile: "token" },
        ),
        "b/pki/ca.crt": pem.caB,
        "a/sub/certs/u.crt": pem.certB,
        "a/sub/certs/u.key": pem.keyB,
        "a/sub/token": "file-token",
      },
      kubeconfig: ["a/sub/config"],
      expect: "usable",
    },
    {
      name: "inline client certificate and key; insecure-skip-tls-verify without a CA",
      files: { config: one({ "insecure-skip-tls-verify": true }, { "client-certificate-data": b64(pem.certA), "client-key-data": b64(pem.keyA) }) },
      kubeconfig: ["config"],
      expect: "usable",
    },
    {
      name: "a proxy-url, basic auth and impersonation",
      files: { config: one({ "proxy-url": "http://127.0.0.1:1" }, { username: "me", password: "pw", as: "someone" }) },
      kubeconfig: ["config"],
      expect: "usable",
    },
    {
      name: "exec with a relative command (against the file's folder), args, env and an install hint",
      files: {
        "b/config": one(
          {},
          {
            exec: {
              apiVersion: V1BETA1,
              command: "./bin/plugin",
              args: ["--flag", "two words"],
              env: pluginEnv([{ name: "PLUGIN_VAR", value: "from the kubeconfig" }]),
              installHint: "install the plugin",
            },
          },
        ),
        "b/bin/plugin": PLUGIN,
      },
      kubeconfig: ["b/config"],
      expect: "usable",
    },
    {
      name: "exec with a command found in PATH (ours, not a PATH the kubeconfig's env sets)",
      files: {
        config: one(
          {},
          { exec: { apiVersion: V1BETA1, command: "kc-differential-plugin", env: pluginEnv([{ name: "PATH", value: "@DECOYBIN@:/usr/bin:/bin" }]) } },
        ),
      },
      kubeconfig: ["config"],
      path: "@PATHBIN@",
      expect: "usable",
    },
    {
      name: "exec with cluster info: the CA file's content, TLS server name, proxy",
      files: {
        config: one(
          { "certificate-authority": "ca.crt", "tls-server-name": "kubernetes", "proxy-url": "http://127.0.0.1:1" },
          { exec: { apiVersion: V1BETA1, command: "./plugin", env: pluginEnv(), provideClusterInfo: true } },
        ),
        "ca.crt": pem.caB,
        plugin: PLUGIN,
      },
      kubeconfig: ["config"],
      expect: "usable",
    },
    {
      name: "a server without a scheme, with a CA",
      files: { config: one({ server: "127.0.0.1:1", "certificate-authority-data": b64(pem.caA) }, { token: "t" }) },
      kubeconfig: ["config"],
      expect: "usable",
      serverDiffers:
        "kubectl makes every scheme-less server http:// (and then sends no credentials, reading them only for TLS); " +
        "Imprimatur makes it https:// when a CA or client certificate is given, so that the CA is used",
    },

    // Refused by both.
    ...(
      [
        ["CA file and data both", one({ "certificate-authority": "ca.crt", "certificate-authority-data": b64(pem.caA) }, { token: "t" })],
        ["a CA with insecure-skip-tls-verify", one({ "certificate-authority-data": b64(pem.caA), "insecure-skip-tls-verify": true }, { token: "t" })],
        ["a proxy-url of another scheme", one({ "proxy-url": "ftp://127.0.0.1:1" }, { token: "t" })],
        ["a client certificate without a key", one({}, { "client-certificate-data": b64(pem.certA) })],
        [
          "client certificate file and data both",
          one({}, { "client-certificate": "u.crt", "client-certificate-data": b64(pem.certA), "client-key-data": b64(pem.keyA) }),
        ],
        ["client key file and data both", one({}, { "client-certificate-data": b64(pem.certA), "client-key": "u.key", "client-key-data": b64(pem.keyA) })],
        ["a token and basic auth", one({}, { token: "t", username: "me", password: "pw" })],
        ["exec without a command", one({}, { exec: { apiVersion: V1BETA1, command: "" } })],
        ["exec without an apiVersion", one({}, { exec: { command: "plugin" } })],
        ["exec with a nameless env variable", one({}, { exec: { apiVersion: V1BETA1, command: "plugin", env: [{ value: "v" }] } })],
        ["exec beside an auth-provider", one({}, { exec: { apiVersion: V1BETA1, command: "plugin" }, "auth-provider": { name: "oidc" } })],
        ["an exec plugin that fails", one({}, { exec: { apiVersion: V1BETA1, command: "false" } })],
        [
          "an exec plugin that answers another apiVersion",
          one(
            {},
            {
              exec: {
                apiVersion: V1BETA1,
                command: "./plugin",
                env: pluginEnv([{ name: "PLUGIN_API_VERSION", value: "client.authentication.k8s.io/v1alpha1" }]),
              },
            },
          ),
        ],
        ["a current-context that is not defined", { ...one({}, { token: "t" }), current: "elsewhere" }],
        [
          "two clusters of one name in one file",
          "clusters:\n- {name: c, cluster: {server: 'https://127.0.0.1:1'}}\n- {name: c, cluster: {server: 'https://127.0.0.1:2'}}\n" +
            "users:\n- {name: u, user: {token: t}}\ncontexts:\n- {name: x, context: {cluster: c, user: u}}\ncurrent-context: x\n",
        ],
        ["not YAML", 'clusters:\n- name: c\n  cluster:\n    server: "https://127.0.0.1:1\n'],
        ["a server that is not a string", "clusters:\n- name: c\n  cluster: {server: 12}\ncontexts:\n- {name: x, context: {cluster: c}}\ncurrent-context: x\n"],
      ] as Array<[string, Case["files"][string]]>
    ).map(([name, config]): Case => ({
      name,
      files: { config, "u.crt": pem.certA, "u.key": pem.keyA, "ca.crt": pem.caA, plugin: PLUGIN },
      kubeconfig: ["config"],
      expect: "refused",
    })),
    { name: "--context naming no context", files: { config: one({}, { token: "t" }) }, kubeconfig: ["config"], context: "elsewhere", expect: "refused" },
    ...(
      [
        ["a CA file that does not exist", one({ "certificate-authority": "missing/ca.crt" }, { token: "t" })],
        ["a client certificate file that does not exist", one({}, { "client-certificate": "missing/u.crt", "client-key-data": b64(pem.keyA) })],
        ["a client key file that does not exist", one({}, { "client-certificate-data": b64(pem.certA), "client-key": "../missing/u.key" })],
        ["a token file that does not exist", one({}, { tokenFile: "missing/token" })],
      ] as Array<[string, Case["files"][string]]>
    ).map(([name, config]): Case => ({ name, files: { "sub/config": config }, kubeconfig: ["sub/config"], expect: "refused", missingPath: true })),

    // Decided otherwise on purpose.
    {
      name: "a cluster without a server",
      files: { config: one({ server: "", "certificate-authority-data": b64(pem.caA) }, { token: "t" }) },
      kubeconfig: ["config"],
      expect: "refused",
      kubectl: { outcome: "default-server", why: "kubectl falls back to http://localhost:8080; Imprimatur never guesses a server" },
    },
    {
      name: "no current-context",
      files: { config: { ...one({}, { token: "t" }), current: undefined } },
      kubeconfig: ["config"],
      expect: "refused",
      kubectl: { outcome: "default-server", why: "kubectl falls back to http://localhost:8080; Imprimatur never guesses a server" },
    },
    {
      name: "a context naming a cluster that is not defined",
      files: { config: { ...one({}, { token: "t" }), contexts: { x: ctx("elsewhere", "u") } } },
      kubeconfig: ["config"],
      expect: "refused",
      kubectl: { outcome: "default-server", why: "kubectl uses its default cluster, http://localhost:8080" },
    },
    {
      name: "a context naming a user that is not defined",
      files: { config: { ...one({}, { token: "t" }), contexts: { x: ctx("c", "nobody") } } },
      kubeconfig: ["config"],
      expect: "refused",
      kubectl: { outcome: "prompts", why: "kubectl asks for a username on its terminal; Imprimatur has none, and refuses as client-go's validateContext does" },
    },
    {
      name: "an exec plugin of client.authentication.k8s.io/v1",
      files: {
        config: one(
          {},
          {
            exec: {
              apiVersion: "client.authentication.k8s.io/v1",
              command: "./plugin",
              env: pluginEnv([{ name: "PLUGIN_API_VERSION", value: "client.authentication.k8s.io/v1" }]),
            },
          },
        ),
        plugin: PLUGIN,
      },
      kubeconfig: ["config"],
      expect: "usable",
      kubectl: { outcome: "refused", why: "kubectl v1.20 predates v1 (v1.22); v1 is what plugins speak now" },
    },
    {
      name: "a socks5 proxy-url",
      files: { config: one({ "proxy-url": "socks5://127.0.0.1:1" }, { token: "t" }) },
      kubeconfig: ["config"],
      expect: "refused",
      kubectl: { outcome: "usable", why: "the HTTP client (undici) has no SOCKS support: refused at start rather than ignored" },
    },
    {
      name: "a KUBECONFIG list naming a file that does not exist",
      files: { config: one({}, { token: "t" }) },
      kubeconfig: ["config", "absent"],
      expect: "refused",
      kubectl: { outcome: "usable", why: "kubectl skips missing files of KUBECONFIG; a path Imprimatur is given must exist (a typo is not silently ignored)" },
    },
    {
      name: "`token-file` (not a kubeconfig field)",
      files: { config: one({}, { "token-file": "token" }), token: "t" },
      kubeconfig: ["config"],
      expect: "usable",
      kubectl: { outcome: "prompts", why: "kubectl reads only tokenFile; Imprimatur also reads token-file, as @kubernetes/client-node did" },
    },
    {
      name: "a key given twice in one mapping",
      files: {
        config:
          "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    server: https://127.0.0.1:2\nusers:\n- {name: u, user: {token: t}}\ncontexts:\n- {name: x, context: {cluster: c, user: u}}\ncurrent-context: x\n",
      },
      kubeconfig: ["config"],
      expect: "refused",
      kubectl: { outcome: "usable", why: "kubectl keeps the last value silently; Imprimatur's YAML reader refuses duplicate keys (src/config/kube-yaml.ts)" },
    },
  ];
}

/** The case's placeholders replaced (folders known only once the temp root exists). */
function placed(c: Case): Case {
  const text = JSON.stringify(c).replaceAll("@PATHBIN@", join(root, "pathbin")).replaceAll("@DECOYBIN@", join(root, "decoybin"));
  return JSON.parse(text) as Case;
}

/** kubectl's view of a field: absent, null and "" are all "not set". */
function field(value: unknown): unknown {
  return value === null || value === "" ? undefined : value;
}

function compareFields(view: Record<string, any>, flat: Record<string, any>, selected: SelectedKubeconfig): void {
  assert.equal(view["current-context"], selected.contextName, "context");
  const context = view.contexts?.[0]?.context ?? {};
  assert.equal(context.cluster, selected.clusterName, "cluster name");
  assert.equal(field(context.user), field(selected.userName), "user name");
  assert.equal(field(context.namespace), selected.namespace, "namespace");

  const cluster = view.clusters?.[0]?.cluster ?? {};
  const ours = selected.cluster;
  assert.equal(cluster.server, ours.server, "server");
  assert.equal(field(cluster["tls-server-name"]), ours.tlsServerName, "tls-server-name");
  assert.equal(cluster["insecure-skip-tls-verify"] ?? false, ours.insecureSkipTlsVerify, "insecure-skip-tls-verify");
  assert.equal(field(cluster["proxy-url"]), ours.proxyUrl, "proxy-url");
  assert.equal(field(cluster["certificate-authority-data"]), ours.certificateAuthorityData, "certificate-authority-data");
  // --flatten puts the content of the file kubectl resolved: it must be the file Imprimatur resolved.
  const flatCluster = flat.clusters?.[0]?.cluster ?? {};
  const fileData = (path: string | undefined, data: string | undefined) => data ?? (path !== undefined ? readFileSync(path).toString("base64") : undefined);
  assert.equal(field(flatCluster["certificate-authority-data"]), fileData(ours.certificateAuthority, ours.certificateAuthorityData), "the CA file");

  const user = view.users?.[0]?.user ?? {};
  const flatUser = flat.users?.[0]?.user ?? {};
  const me = selected.user;
  assert.equal(field(user.token), me.token, "token");
  assert.equal(field(user.username), me.username, "username");
  assert.equal(field(user.password), me.password, "password");
  assert.equal(field(user.as), me.impersonate, "as");
  assert.equal(field(user.tokenFile) === undefined, me.tokenFile === undefined, "tokenFile");
  assert.equal(field(flatUser["client-certificate-data"]), fileData(me.clientCertificate, me.clientCertificateData), "the client certificate");
  assert.equal(field(flatUser["client-key-data"]), fileData(me.clientKey, me.clientKeyData), "the client key");
  assert.equal(user.exec === undefined, me.exec === undefined, "exec");
  if (user.exec && me.exec) {
    assert.equal(user.exec.apiVersion, me.exec.apiVersion, "exec apiVersion");
    assert.deepEqual(user.exec.args ?? [], me.exec.args, "exec args");
    assert.deepEqual(user.exec.env ?? [], me.exec.env, "exec env");
    assert.equal(user.exec.provideClusterInfo ?? false, me.exec.provideClusterInfo, "exec provideClusterInfo");
    assert.equal(field(user.exec.installHint), me.exec.installHint, "exec installHint");
    if (!user.exec.command.includes("/")) assert.equal(user.exec.command, me.exec.command, "exec command");
  }
}

/** Two records of one plugin's runs (kubectl's, ours) say it was run alike. */
function compareRecords(kubectl: PluginRecord | undefined, ours: PluginRecord | undefined): void {
  assert.ok(kubectl, "kubectl ran the plugin");
  assert.ok(ours, "Imprimatur ran the plugin");
  assert.equal(ours.argv0, kubectl.argv0, "the plugin's path");
  assert.equal(ours.args, kubectl.args, "the plugin's args");
  assert.equal(ours.var, kubectl.var, "the kubeconfig's env variable");
  const theirs = JSON.parse(kubectl.info) as Record<string, any>;
  const mine = JSON.parse(ours.info) as Record<string, any>;
  assert.equal(mine.apiVersion, theirs.apiVersion);
  assert.equal(mine.kind, theirs.kind);
  // kubectl v1.20 sends no spec.interactive (v1.22 added it); Imprimatur says false, a server having no terminal.
  assert.equal(mine.spec.interactive, false);
  const clusterOf = (spec: Record<string, any>) => {
    const c = spec.cluster as Record<string, unknown> | undefined;
    if (!c) return undefined;
    return Object.fromEntries(
      ["server", "tls-server-name", "insecure-skip-tls-verify", "certificate-authority-data", "proxy-url"].map((k) => [k, field(c[k])]),
    );
  };
  assert.deepEqual(clusterOf(mine.spec), clusterOf(theirs.spec), "KUBERNETES_EXEC_INFO's cluster");
}

const pathIn = (message: string, pattern: RegExp) => pattern.exec(message)?.[1];

describe("a kubeconfig means the same to kubectl and to Imprimatur", () => {
  let index = 0;
  for (const template of cases()) {
    const number = index++;
    test(template.name, async () => {
      const c = placed(template);
      const files = writeCase(number, c);
      const contextArgs = c.context ? ["--context", c.context] : [];
      const kubectlRun = await runKubectl(["get", "--raw", "/version", "--request-timeout=1s", "-v=6", ...contextArgs], files, c.path);
      const kubectlRecord = takeRecord(number);
      const theirs = kubectlOutcome(kubectlRun);
      const mine = await ours(files, c);
      const ourRecord = takeRecord(number);

      const expectedKubectl = c.kubectl?.outcome ?? c.expect;
      assert.equal(theirs.outcome, expectedKubectl, `kubectl: ${theirs.message}`);
      assert.equal(mine.outcome, c.expect, `Imprimatur: ${mine.message}`);

      if (c.missingPath) {
        const theirPath = pathIn(theirs.message, /open (\/[^:]+): no such file/);
        assert.ok(theirPath, theirs.message);
        assert.equal(pathIn(mine.message, /(\/\S+) does not exist/), theirPath, mine.message);
      }
      if (c.expect !== "usable" || c.kubectl) return;

      // Both accept it: the same context, cluster, user and files; the same URL; the plugin run alike.
      const view = await runKubectl(["config", "view", "--minify", "--raw", "-o", "json", ...contextArgs], files);
      assert.equal(view.code, 0, view.stderr);
      const flat = await runKubectl(["config", "view", "--minify", "--raw", "--flatten", "-o", "json", ...contextArgs], files);
      assert.equal(flat.code, 0, flat.stderr);
      const selected = selectKubeconfigContext(mergeKubeconfigs(files.map(readKubeconfigFile)), c.context);
      compareFields(JSON.parse(view.stdout) as Record<string, any>, JSON.parse(flat.stdout) as Record<string, any>, selected);
      if (c.serverDiffers) assert.notEqual(theirs.url, mine.server, c.serverDiffers);
      else assert.equal(theirs.url, mine.server, "the URL asked");
      if (selected.user.exec) compareRecords(kubectlRecord, ourRecord);
    });
  }
});
