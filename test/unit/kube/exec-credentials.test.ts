// Credentials from a kubeconfig's exec plugin (src/kube/exec-credentials.ts), with a real plugin: a shell script,
// written to a temp folder, that records how it was run (its args, its environment, KUBERNETES_EXEC_INFO) and
// prints the ExecCredential the test put beside it. The kubeconfigs are read by loadKubeConnection, as in use.
//
// The last two tests send requests through KubeClient to a small HTTPS server on loopback instead of kube-apiserver:
// they need an API that refuses a credential (401) on demand, and tells which client certificate each connection
// presented, which kube-apiserver does not do. test/unit/kube/kube-client.test.ts runs exec credentials against
// the real kube-apiserver.
import assert from "node:assert/strict";
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { KubeApiError } from "../../../src/kube/api-requests.ts";
import { ExecCredentialSource } from "../../../src/kube/exec-credentials.ts";
import { KubeClient } from "../../../src/kube/kube-client.ts";
import { loadKubeConnection } from "../../../src/kube/kube-connection.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";

const V1 = "client.authentication.k8s.io/v1";
const V1BETA1 = "client.authentication.k8s.io/v1beta1";

/** Records its run in $PLUGIN_DIR and prints out.N (N: which run this is) or else out; exits with `exit` when there is one. */
const PLUGIN = `#!/bin/sh
d="$PLUGIN_DIR"
echo run >> "$d/runs"
n=$(wc -l < "$d/runs" | tr -d ' ')
printf '%s' "$KUBERNETES_EXEC_INFO" > "$d/info"
printf '%s|%s' "\${PLUGIN_VAR-unset}" "\${INHERITED_VAR-unset}" > "$d/vars"
printf '%s\\n' "$@" > "$d/args"
if [ -f "$d/exit" ]; then echo "first line" >&2; echo "plugin says no" >&2; exit "$(cat "$d/exit")"; fi
if [ -f "$d/out.$n" ]; then cat "$d/out.$n"; else cat "$d/out"; fi
`;

let root: string;
let caPem: string;
let serving: { certPem: string; keyPem: string };
let clientA: { certPem: string; keyPem: string };
let clientB: { certPem: string; keyPem: string };
let cases = 0;

before(async () => {
  root = await mkdtemp(join(tmpdir(), "imprimatur-exec-credentials-"));
  const ca = await createCertificateAuthority("exec-credentials test CA");
  caPem = ca.certPem;
  writeFileSync(join(root, "ca.crt"), caPem);
  [serving, clientA, clientB] = await Promise.all([
    issueCertificate(ca, { commonName: "127.0.0.1", ipAddresses: ["127.0.0.1"] }),
    issueCertificate(ca, { commonName: "user-a", client: true }),
    issueCertificate(ca, { commonName: "user-b", client: true }),
  ]);
});

after(async () => {
  await rm(root, { recursive: true, force: true });
});

interface Plugin {
  dir: string;
  /** The kubeconfig naming it. */
  kubeconfig: string;
  /** What the next run prints (run: only the N-th run). */
  answer(output: unknown, run?: number): void;
  runs(): number;
  info(): Record<string, any>;
  vars(): string;
  args(): string[];
}

/**
 * A plugin in a folder of its own and a kubeconfig using it (exec fields and cluster fields added to the defaults);
 * the kubeconfig's env gives the plugin its folder.
 */
async function plugin(exec: Record<string, unknown> = {}, cluster: Record<string, unknown> = {}): Promise<Plugin> {
  const dir = await mkdtemp(join(root, `plugin-${cases++}-`));
  writeFileSync(join(dir, "plugin"), PLUGIN);
  chmodSync(join(dir, "plugin"), 0o755);
  const env = [{ name: "PLUGIN_DIR", value: dir }, ...((exec["env"] as unknown[] | undefined) ?? [])];
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server: "https://127.0.0.1:1", ...cluster } }],
      users: [{ name: "u", user: { exec: { apiVersion: V1, command: "./plugin", ...exec, env } } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  const read = (name: string) => readFileSync(join(dir, name), "utf8");
  return {
    dir,
    kubeconfig,
    answer: (output, run) => writeFileSync(join(dir, run === undefined ? "out" : `out.${run}`), typeof output === "string" ? output : JSON.stringify(output)),
    runs: () => (existsSync(join(dir, "runs")) ? read("runs").split("\n").filter(Boolean).length : 0),
    info: () => JSON.parse(read("info")) as Record<string, any>,
    vars: () => read("vars"),
    args: () => read("args").split("\n").slice(0, -1),
  };
}

const credential = (apiVersion: string, status: Record<string, unknown>) => ({ apiVersion, kind: "ExecCredential", status });

function sourceOf(p: Plugin): ExecCredentialSource {
  const source = loadKubeConnection(p.kubeconfig).exec;
  assert.ok(source);
  return source;
}

/** Runs `body` with process.env[name] set to `value`, restoring it after. */
async function withEnv<T>(name: string, value: string, body: () => Promise<T>): Promise<T> {
  const saved = process.env[name];
  process.env[name] = value;
  try {
    return await body();
  } finally {
    if (saved === undefined) delete process.env[name];
    else process.env[name] = saved;
  }
}

test("v1: the plugin's token; its args, our environment with the kubeconfig's env over it, KUBERNETES_EXEC_INFO", async () => {
  const p = await plugin({ args: ["--region", "two words"], env: [{ name: "PLUGIN_VAR", value: "from the kubeconfig" }] });
  p.answer(credential(V1, { token: "tok-1" }));
  const source = sourceOf(p);
  const got = await withEnv("INHERITED_VAR", "from our environment", () => withEnv("PLUGIN_VAR", "from ours", () => source.credential()));
  assert.deepEqual(got, { token: "tok-1" });
  assert.deepEqual(p.args(), ["--region", "two words"]);
  assert.equal(p.vars(), "from the kubeconfig|from our environment");
  // Never interactive (a server has no terminal), and no cluster unless provideClusterInfo says so.
  assert.deepEqual(p.info(), { apiVersion: V1, kind: "ExecCredential", spec: { interactive: false } });
  // Without an expiry the credential is kept: no second run.
  assert.equal(await source.credential(), got);
  assert.equal(p.runs(), 1);
});

test("callers asking at once share one run of the plugin", async () => {
  const p = await plugin();
  p.answer(credential(V1, { token: "shared" }));
  const source = sourceOf(p);
  const all = await Promise.all(Array.from({ length: 8 }, () => source.credential()));
  assert.ok(all.every((c) => c === all[0] && c.token === "shared"));
  assert.equal(p.runs(), 1);
});

test("v1beta1: a client certificate; provideClusterInfo hands over the cluster, a CA file as its data", async () => {
  const p = await plugin(
    { apiVersion: V1BETA1, provideClusterInfo: true },
    { "certificate-authority": join(root, "ca.crt"), "tls-server-name": "kubernetes", "proxy-url": "http://127.0.0.1:3128" },
  );
  p.answer(credential(V1BETA1, { clientCertificateData: clientA.certPem, clientKeyData: clientA.keyPem }));
  assert.deepEqual(await sourceOf(p).credential(), { clientCertificateData: clientA.certPem, clientKeyData: clientA.keyPem });
  assert.deepEqual(p.info(), {
    apiVersion: V1BETA1,
    kind: "ExecCredential",
    spec: {
      interactive: false,
      cluster: {
        server: "https://127.0.0.1:1",
        "tls-server-name": "kubernetes",
        "certificate-authority-data": Buffer.from(caPem).toString("base64"),
        "proxy-url": "http://127.0.0.1:3128",
      },
    },
  });

  const caData = Buffer.from(caPem).toString("base64");
  const inline = await plugin({ provideClusterInfo: true }, { "certificate-authority-data": caData });
  inline.answer(credential(V1, { token: "t" }));
  await sourceOf(inline).credential();
  assert.deepEqual(inline.info().spec, { interactive: false, cluster: { server: "https://127.0.0.1:1", "certificate-authority-data": caData } });
  const insecure = await plugin({ provideClusterInfo: true }, { "insecure-skip-tls-verify": true });
  insecure.answer(credential(V1, { token: "t" }));
  await sourceOf(insecure).credential();
  assert.deepEqual(insecure.info().spec, { interactive: false, cluster: { server: "https://127.0.0.1:1", "insecure-skip-tls-verify": true } });
});

test("an expiring credential is renewed (10 s early); one valid for longer is kept until then", async () => {
  const p = await plugin();
  const soon = new Date(Date.now() + 5_000).toISOString();
  p.answer(credential(V1, { token: "soon", expirationTimestamp: soon }));
  const source = sourceOf(p);
  assert.deepEqual(await source.credential(), { token: "soon", expiresAt: Date.parse(soon) });
  const later = new Date(Date.now() + 3_600_000).toISOString();
  p.answer(credential(V1, { token: "later", expirationTimestamp: later }));
  assert.equal((await source.credential()).token, "later", "within 10 s of its expiry: the plugin runs again");
  assert.equal(p.runs(), 2);
  assert.equal((await source.credential()).token, "later");
  assert.equal(p.runs(), 2);
  p.answer(credential(V1, { token: "past", expirationTimestamp: "2001-01-01T00:00:00Z" }));
  const expired = sourceOf(p);
  await expired.credential();
  await expired.credential();
  assert.equal(p.runs(), 4, "an expired credential is never kept");
});

test("output that is not a usable ExecCredential is refused (unauthorized), naming the problem; the next call runs the plugin again", async () => {
  const p = await plugin();
  const source = sourceOf(p);
  const refused = async (output: unknown, message: RegExp) => {
    p.answer(output);
    await assert.rejects(source.credential(), (e: unknown) => {
      assert.ok(e instanceof KubeApiError, String(e));
      assert.equal(e.code, "unauthorized");
      assert.match(e.message, new RegExp(`^kubeconfig ${p.kubeconfig}, context "x", user "u": exec plugin ${p.dir}/plugin: `));
      assert.match(e.message, message);
      return true;
    });
  };
  await refused(
    credential(V1BETA1, { token: "t" }),
    /its output has apiVersion "client\.authentication\.k8s\.io\/v1beta1", the kubeconfig asked for client\.authentication\.k8s\.io\/v1/,
  );
  await refused({ apiVersion: V1, kind: "Status", status: { token: "t" } }, /its output has kind "Status", not ExecCredential/);
  await refused("token: t\n", /its output is not JSON/);
  await refused("null", /its output is not an ExecCredential/);
  await refused({ apiVersion: V1, kind: "ExecCredential" }, /its ExecCredential has no status/);
  await refused(credential(V1, {}), /status has neither a token nor a client certificate/);
  await refused(credential(V1, { clientCertificateData: clientA.certPem }), /status has one of clientCertificateData and clientKeyData without the other/);
  await refused(credential(V1, { token: 12 }), /status\.token must be a string/);
  await refused(credential(V1, { token: "t", expirationTimestamp: "tomorrow" }), /status\.expirationTimestamp "tomorrow" is not a time/);
  assert.equal(p.runs(), 9);
  p.answer(credential(V1, { token: "at last" }));
  assert.equal((await source.credential()).token, "at last");
});

test("a plugin that fails: its stderr's last lines; one that cannot be found: the install hint", async () => {
  const failing = await plugin({ installHint: "not shown: the plugin was found" });
  writeFileSync(join(failing.dir, "exit"), "3");
  await assert.rejects(sourceOf(failing).credential(), (e: unknown) => {
    assert.ok(e instanceof KubeApiError);
    assert.equal(e.code, "unauthorized");
    assert.match(e.message, /exec plugin .*\/plugin failed: Command failed: .*\(first line plugin says no\)$/);
    return true;
  });

  const absent = await plugin({ command: "./absent", installHint: "install it from example.com" });
  await assert.rejects(sourceOf(absent).credential(), {
    code: "unauthorized",
    message: /exec plugin .*\/absent failed: .*ENOENT.*; install it from example\.com$/,
  });

  const notInPath = await plugin({ command: "imprimatur-no-such-plugin", installHint: "install it from example.com" });
  await assert.rejects(sourceOf(notInPath).credential(), {
    code: "unauthorized",
    message: /exec plugin imprimatur-no-such-plugin failed: no executable imprimatur-no-such-plugin in PATH; install it from example\.com$/,
  });
});

test("a command without a path is looked up in our PATH, not in the PATH the kubeconfig's env sets (as client-go)", async () => {
  const decoy = await mkdtemp(join(root, "decoy-"));
  writeFileSync(join(decoy, "plugin"), `#!/bin/sh\necho '${JSON.stringify(credential(V1, { token: "decoy" }))}'\n`);
  chmodSync(join(decoy, "plugin"), 0o755);
  const p = await plugin({ command: "plugin", env: [{ name: "PATH", value: `${decoy}:/usr/bin:/bin` }] });
  p.answer(credential(V1, { token: "found" }));
  assert.equal((await withEnv("PATH", `${p.dir}:${process.env.PATH ?? ""}`, () => sourceOf(p).credential())).token, "found");
});

test("an apiVersion this client does not speak is refused when the kubeconfig is loaded", async () => {
  const p = await plugin({ apiVersion: "client.authentication.k8s.io/v1alpha1" });
  assert.throws(() => loadKubeConnection(p.kubeconfig), {
    name: "KubeError",
    code: "unreadable-kubeconfig",
    message: /exec plugin apiVersion "client\.authentication\.k8s\.io\/v1alpha1" is not supported/,
  });
  assert.throws(() => new ExecCredentialSource({ command: "x", args: [], env: [], apiVersion: "v2", provideClusterInfo: false }, undefined, "here"), {
    name: "KubeApiError",
    message: /^here: exec plugin apiVersion "v2" is not one of/,
  });
});

/** The stand-in API: answers 200 or 401 as `refuse` says, recording each request's token and its connection's client certificate. */
async function standInApi(refuse: (seen: { token: string | undefined; cn: string | undefined }) => boolean) {
  const seen: Array<{ token: string | undefined; cn: string | undefined; connection: number }> = [];
  let connections = 0;
  const ids = new WeakMap<object, number>();
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem, requestCert: true, rejectUnauthorized: false }, (req, res) => {
    const socket = req.socket as TLSSocket;
    const cn = socket.getPeerCertificate().subject?.CN as string | undefined;
    const token = /^Bearer (.*)$/.exec(req.headers.authorization ?? "")?.[1];
    seen.push({ token, cn, connection: ids.get(socket) ?? -1 });
    const status = refuse({ token, cn }) ? 401 : 200;
    res.writeHead(status, { "content-type": "application/json" });
    res.end(
      JSON.stringify(status === 200 ? { kind: "APIVersions", versions: ["v1"] } : { kind: "Status", status: "Failure", reason: "Unauthorized", code: 401 }),
    );
  });
  server.on("secureConnection", (socket) => ids.set(socket, connections++));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    seen,
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test("a token the API refuses (401) is fetched anew and the request sent again, once", async () => {
  let refused = new Set(["first"]);
  const api = await standInApi(({ token }) => token === undefined || refused.has(token));
  const p = await plugin({}, { server: api.url, "certificate-authority": join(root, "ca.crt") });
  p.answer(credential(V1, { token: "first" }), 1);
  p.answer(credential(V1, { token: "second" }), 2);
  p.answer(credential(V1, { token: "third" }));
  const client = new KubeClient(loadKubeConnection(p.kubeconfig));
  try {
    assert.deepEqual(await client.request("GET", "/api"), { kind: "APIVersions", versions: ["v1"] });
    assert.deepEqual(
      api.seen.map((s) => s.token),
      ["first", "second"],
    );
    assert.equal(p.runs(), 2);
    await client.request("GET", "/api");
    assert.equal(p.runs(), 2, "an accepted token is kept");

    // An API that refuses every token: one new token, one retry, then the 401 is the answer.
    refused = new Set(["second", "third"]);
    await assert.rejects(client.request("GET", "/api"), { name: "KubeApiError", code: "unauthorized", httpStatus: 401 });
    assert.deepEqual(
      api.seen.slice(3).map((s) => s.token),
      ["second", "third"],
    );
    assert.equal(p.runs(), 3);
  } finally {
    await client.close();
    await api.stop();
  }
});

test("an exec client certificate is presented; a new one, after a 401, goes out on a new connection", async () => {
  const api = await standInApi(({ cn }) => cn !== "user-b");
  const p = await plugin({}, { server: api.url, "certificate-authority": join(root, "ca.crt") });
  p.answer(credential(V1, { clientCertificateData: clientA.certPem, clientKeyData: clientA.keyPem }), 1);
  p.answer(credential(V1, { clientCertificateData: clientB.certPem, clientKeyData: clientB.keyPem }));
  const client = new KubeClient(loadKubeConnection(p.kubeconfig));
  try {
    await client.request("GET", "/api");
    assert.deepEqual(
      api.seen.map((s) => [s.cn, s.token]),
      [
        ["user-a", undefined],
        ["user-b", undefined],
      ],
    );
    assert.notEqual(api.seen[0]!.connection, api.seen[1]!.connection);
    // The new certificate's connection is kept for the requests after.
    for (let i = 0; i < 5; i++) await client.request("GET", "/api");
    assert.ok(api.seen.slice(1).every((s) => s.cn === "user-b" && s.connection === api.seen[1]!.connection));
    assert.equal(p.runs(), 2);
  } finally {
    await client.close();
    await api.stop();
  }
});
