// A kubeconfig as client-go reads it (src/kube/kubeconfig-document.ts) and the connection made of it
// (src/kube/kube-connection.ts): fields parsed, relative paths resolved against the folder of the file that holds
// them, several files merged (the first to name an entry wins), a context selected and checked with each of
// client-go's ConfirmUsable rules, and each way of having no usable API refused by code with a message that says
// what to fix. test/unit/kube/kubeconfig-differential.test.ts compares the same with the real kubectl.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { loadKubeConnection } from "../../../src/kube/kube-connection.ts";
import { KubeError } from "../../../src/kube/kube-error.ts";
import { mergeKubeconfigs, parseKubeconfig, selectKubeconfigContext, type KubeconfigFile } from "../../../src/kube/kubeconfig-document.ts";

const PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const PEM_DATA = Buffer.from(PEM).toString("base64");

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-kubeconfig-document-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Parts {
  clusters?: Record<string, Record<string, unknown>>;
  users?: Record<string, Record<string, unknown>>;
  contexts?: Record<string, Record<string, unknown>>;
  current?: string;
}

/** A kubeconfig's text (JSON, which is YAML) from maps of names to entries. */
function kubeconfigText(parts: Parts): string {
  const list = (entries: Record<string, Record<string, unknown>> | undefined, key: string) =>
    Object.entries(entries ?? {}).map(([name, body]) => ({ name, [key]: body }));
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: list(parts.clusters, "cluster"),
    users: list(parts.users, "user"),
    contexts: list(parts.contexts, "context"),
    ...(parts.current !== undefined ? { "current-context": parts.current } : {}),
  });
}

/** The usual one-context file, with `cluster` and `user` fields added. */
function single(cluster: Record<string, unknown> = {}, user: Record<string, unknown> = { token: "t" }, extra: Partial<Parts> = {}): KubeconfigFile {
  return parseKubeconfig(
    kubeconfigText({
      clusters: { c: { server: "https://127.0.0.1:6443", ...cluster } },
      users: { u: user },
      contexts: { x: { cluster: "c", user: "u" } },
      current: "x",
      ...extra,
    }),
    "/etc/kube/config",
    "/etc/kube",
  );
}

/** Asserts that selecting `file`'s context fails with a KubeError of `code` whose message matches `message`. */
function assertRefused(file: KubeconfigFile, message: RegExp, code = "unreadable-kubeconfig", contextName?: string): void {
  assert.throws(
    () => selectKubeconfigContext(file, contextName),
    (e: unknown) => {
      assert.ok(e instanceof KubeError, String(e));
      assert.equal(e.code, code);
      assert.match(e.message, message);
      assert.match(e.message, /^kubeconfig \/etc\/kube\/config: /);
      return true;
    },
  );
}

describe("parsing", () => {
  test("every field of a cluster, a user (with exec) and a context is read", () => {
    const file = parseKubeconfig(
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: prod",
        "  cluster:",
        "    server: https://api.example:6443",
        `    certificate-authority-data: ${PEM_DATA}`,
        "    tls-server-name: kubernetes.default",
        "    proxy-url: http://proxy.example:3128",
        "    insecure-skip-tls-verify: no", // YAML 1.1, as kubectl reads it
        "users:",
        "- name: admin",
        "  user:",
        "    token: sekret",
        "    as: someone",
        "- name: plugin",
        "  user:",
        "    exec:",
        "      apiVersion: client.authentication.k8s.io/v1",
        "      command: get-token",
        "      args: [--cluster, prod]",
        "      env:",
        "      - {name: REGION, value: eu}",
        "      - {name: EMPTY}",
        "      installHint: install get-token",
        "      provideClusterInfo: true",
        "- name: basic",
        "  user: {username: me, password: pw}",
        "- name: certs",
        "  user:",
        `    client-certificate-data: ${PEM_DATA}`,
        `    client-key-data: ${PEM_DATA}`,
        "contexts:",
        "- name: main",
        "  context: {cluster: prod, user: admin, namespace: shop}",
        "current-context: main",
        "",
      ].join("\n"),
      "/k/config",
      "/k",
    );
    assert.equal(file.currentContext, "main");
    assert.deepEqual(file.clusters.get("prod"), {
      server: "https://api.example:6443",
      certificateAuthorityData: PEM_DATA,
      tlsServerName: "kubernetes.default",
      proxyUrl: "http://proxy.example:3128",
      insecureSkipTlsVerify: false,
    });
    assert.deepEqual(file.users.get("admin"), { hasAuthProvider: false, token: "sekret", impersonate: "someone" });
    assert.deepEqual(file.users.get("plugin"), {
      hasAuthProvider: false,
      exec: {
        command: "get-token",
        args: ["--cluster", "prod"],
        env: [
          { name: "REGION", value: "eu" },
          { name: "EMPTY", value: "" },
        ],
        apiVersion: "client.authentication.k8s.io/v1",
        installHint: "install get-token",
        provideClusterInfo: true,
      },
    });
    assert.deepEqual(file.users.get("basic"), { hasAuthProvider: false, username: "me", password: "pw" });
    assert.deepEqual(file.users.get("certs"), { hasAuthProvider: false, clientCertificateData: PEM_DATA, clientKeyData: PEM_DATA });
    assert.deepEqual(file.contexts.get("main"), { cluster: "prod", user: "admin", namespace: "shop" });
  });

  test("relative paths are resolved against the file's folder; absolute ones, and an exec command without a separator, are kept", () => {
    const file = parseKubeconfig(
      kubeconfigText({
        clusters: { rel: { server: "https://a", "certificate-authority": "pki/ca.crt" }, abs: { server: "https://b", "certificate-authority": "/pki/ca.crt" } },
        users: {
          files: { "client-certificate": "./pki/u.crt", "client-key": "../keys/u.key", tokenFile: "token" },
          relativeCommand: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "bin/plugin" } },
          dotCommand: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "./plugin" } },
          pathCommand: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "kubelogin" } },
          absoluteCommand: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "/usr/bin/kubelogin" } },
        },
      }),
      "/home/me/.kube/config",
      "/home/me/.kube",
    );
    assert.equal(file.clusters.get("rel")?.certificateAuthority, "/home/me/.kube/pki/ca.crt");
    assert.equal(file.clusters.get("abs")?.certificateAuthority, "/pki/ca.crt");
    const files = file.users.get("files");
    assert.equal(files?.clientCertificate, "/home/me/.kube/pki/u.crt");
    assert.equal(files?.clientKey, "/home/me/keys/u.key");
    assert.equal(files?.tokenFile, "/home/me/.kube/token");
    assert.equal(file.users.get("relativeCommand")?.exec?.command, "/home/me/.kube/bin/plugin");
    assert.equal(file.users.get("dotCommand")?.exec?.command, "/home/me/.kube/plugin");
    assert.equal(file.users.get("pathCommand")?.exec?.command, "kubelogin");
    assert.equal(file.users.get("absoluteCommand")?.exec?.command, "/usr/bin/kubelogin");
  });

  test("`token-file` is read as tokenFile (kept from @kubernetes/client-node; kubectl reads only tokenFile), and tokenFile wins", () => {
    const file = parseKubeconfig(kubeconfigText({ users: { a: { "token-file": "t1" }, b: { tokenFile: "t2", "token-file": "t3" } } }), "/k/config", "/k");
    assert.equal(file.users.get("a")?.tokenFile, "/k/t1");
    assert.equal(file.users.get("b")?.tokenFile, "/k/t2");
  });

  test("an empty file, or one holding only null, is an empty config; empty strings are absent fields", () => {
    for (const text of ["", "\n", "# nothing\n", "null\n", "~\n"]) {
      const file = parseKubeconfig(text, "/k/config", "/k");
      assert.equal(file.clusters.size + file.users.size + file.contexts.size, 0, JSON.stringify(text));
      assert.equal(file.currentContext, undefined);
    }
    const blank = parseKubeconfig(
      kubeconfigText({ clusters: { c: { server: "https://a", "certificate-authority": "", "tls-server-name": "" } }, current: "" }),
      "/k/c",
      "/k",
    );
    assert.deepEqual(blank.clusters.get("c"), { server: "https://a", insecureSkipTlsVerify: false });
    assert.equal(blank.currentContext, undefined);
  });

  test("YAML and shape errors name the file, and the line for YAML", () => {
    const refused = (text: string, message: RegExp) =>
      assert.throws(
        () => parseKubeconfig(text, "/k/config", "/k"),
        (e: unknown) => {
          assert.ok(e instanceof KubeError);
          assert.equal(e.code, "unreadable-kubeconfig");
          assert.match(e.message, /^kubeconfig \/k\/config: /);
          assert.match(e.message, message);
          return true;
        },
      );
    refused("clusters:\n- name: c\n  cluster:\n    server: https://a\n   bad: indent\n", /not valid YAML \(line 5\)/);
    refused("clusters: []\nusers: []\nclusters: []\n", /not valid YAML \(line 3\): duplicate key "clusters" \(first on line 1\)/);
    refused("clusters: [\n", /not valid YAML \(line \d+\)/);
    refused("clusters: []\n---\nusers: []\n", /more than one YAML document/);
    refused("- a\n- b\n", /is not a YAML mapping/);
    refused("clusters: {c: {server: x}}\n", /clusters must be a list/);
    refused("clusters:\n- cluster: {server: https://a}\n", /clusters\[0\] has no name/);
    refused("clusters:\n- name: c\n  cluster: [1]\n", /clusters "c": cluster must be a mapping/);
    refused("clusters:\n- name: c\n  cluster: {server: 12}\n", /clusters "c": server must be a string, got 12/);
    refused("clusters:\n- name: c\n  cluster: {server: https://a, insecure-skip-tls-verify: maybe}\n", /insecure-skip-tls-verify must be true or false/);
    refused("users:\n- name: u\n  user: {exec: {command: x, args: [1]}}\n", /exec\.args must be a list of strings/);
    refused("users:\n- name: u\n  user: {exec: {command: x, env: {A: b}}}\n", /exec\.env must be a list of \{name, value\}/);
    refused("current-context: [x]\n", /current-context must be a string/);
    // client-go refuses a file with two entries of one name: which one is meant cannot be told.
    refused("clusters:\n- {name: c, cluster: {server: https://a}}\n- {name: c, cluster: {server: https://b}}\n", /clusters: duplicate name "c"/);
    refused("contexts:\n- {name: x, context: {cluster: c}}\n- {name: x, context: {cluster: d}}\n", /contexts: duplicate name "x"/);
  });
});

describe("merging", () => {
  const a = parseKubeconfig(
    kubeconfigText({
      clusters: { shared: { server: "https://a", "certificate-authority": "ca.crt" } },
      users: { shared: { token: "from-a" } },
      contexts: { shared: { cluster: "shared", user: "shared", namespace: "a" } },
    }),
    "/a/config",
    "/a",
  );
  const b = parseKubeconfig(
    kubeconfigText({
      clusters: { shared: { server: "https://b", "tls-server-name": "b" }, onlyB: { server: "https://only-b", "certificate-authority": "ca.crt" } },
      users: { shared: { tokenFile: "token" }, onlyB: { token: "b" } },
      contexts: { shared: { cluster: "onlyB", user: "onlyB" }, onlyB: { cluster: "onlyB", user: "shared" } },
      current: "onlyB",
    }),
    "/b/config",
    "/b",
  );
  const c = parseKubeconfig(kubeconfigText({ current: "shared" }), "/c/config", "/c");

  test("the first file to name a cluster, user or context wins it whole (no field of a later one is mixed in)", () => {
    const merged = mergeKubeconfigs([a, b, c]);
    assert.equal(merged.path, "/a/config:/b/config:/c/config");
    assert.deepEqual(merged.clusters.get("shared"), { server: "https://a", certificateAuthority: "/a/ca.crt", insecureSkipTlsVerify: false });
    assert.deepEqual(merged.users.get("shared"), { hasAuthProvider: false, token: "from-a" });
    assert.deepEqual(merged.contexts.get("shared"), { cluster: "shared", user: "shared", namespace: "a" });
    // Entries keep the paths of the file they came from.
    assert.equal(merged.clusters.get("onlyB")?.certificateAuthority, "/b/ca.crt");
  });

  test("the first current-context set wins; a file that sets none is passed over", () => {
    assert.equal(mergeKubeconfigs([a, b, c]).currentContext, "onlyB");
    assert.equal(mergeKubeconfigs([c, b]).currentContext, "shared");
    assert.equal(mergeKubeconfigs([a]).currentContext, undefined);
    const selected = selectKubeconfigContext(mergeKubeconfigs([a, b, c]));
    assert.equal(selected.contextName, "onlyB");
    assert.equal(selected.cluster.server, "https://only-b");
    assert.equal(selected.user.token, "from-a"); // context from b, user "shared" from a
    assert.deepEqual(selected.files, ["/a/config", "/b/config", "/c/config"]);
  });
});

describe("selection", () => {
  const file = parseKubeconfig(
    kubeconfigText({
      clusters: { c: { server: "https://c" }, d: { server: "https://d" } },
      users: { u: { token: "t" } },
      contexts: {
        x: { cluster: "c", user: "u", namespace: "shop" },
        y: { cluster: "d", user: "u" },
        anonymous: { cluster: "d" },
        noCluster: { user: "u" },
        undefinedCluster: { cluster: "elsewhere", user: "u" },
        undefinedUser: { cluster: "c", user: "nobody" },
      },
      current: "x",
    }),
    "/etc/kube/config",
    "/etc/kube",
  );

  test("the current-context, or the context asked for, with its cluster, user and namespace", () => {
    const current = selectKubeconfigContext(file);
    assert.deepEqual(
      { context: current.contextName, cluster: current.clusterName, user: current.userName, server: current.cluster.server, namespace: current.namespace },
      { context: "x", cluster: "c", user: "u", server: "https://c", namespace: "shop" },
    );
    const asked = selectKubeconfigContext(file, "y");
    assert.equal(asked.contextName, "y");
    assert.equal(asked.cluster.server, "https://d");
    assert.equal(asked.namespace, undefined);
    assert.deepEqual(selectKubeconfigContext(file, "").contextName, "x", "an empty name is no choice");
  });

  test("a context without a user is anonymous", () => {
    const anonymous = selectKubeconfigContext(file, "anonymous");
    assert.equal(anonymous.userName, "");
    assert.deepEqual(anonymous.user, { hasAuthProvider: false });
  });

  test("no current-context, a current-context or asked-for context not defined, an undefined cluster or user: refused by code", () => {
    const none = parseKubeconfig(kubeconfigText({ clusters: { c: { server: "https://c" } } }), "/etc/kube/config", "/etc/kube");
    assertRefused(none, /no current-context is set/, "no-current-context");
    const dangling = parseKubeconfig(kubeconfigText({ clusters: { c: { server: "https://c" } }, current: "gone" }), "/etc/kube/config", "/etc/kube");
    assertRefused(dangling, /context "gone" is not defined/, "no-current-context");
    assertRefused(file, /context "other" is not defined/, "unreadable-kubeconfig", "other");
    assertRefused(file, /context "noCluster" names no cluster/, "undefined-cluster", "noCluster");
    assertRefused(file, /context "undefinedCluster" names cluster "elsewhere", which is not defined/, "undefined-cluster", "undefinedCluster");
    assertRefused(file, /context "undefinedUser" names user "nobody", which is not defined/, "unreadable-kubeconfig", "undefinedUser");
  });
});

describe("client-go's ConfirmUsable rules", () => {
  test("the cluster: a server, and a URL; CA file or data, not both; no CA with insecure; a proxy-url of http, https or socks5", () => {
    assertRefused(single({ server: "" }), /context "x": no server found for cluster "c"/);
    assertRefused(single({ server: "ftp://a" }), /server "ftp:\/\/a" is not a URL/);
    assertRefused(
      single({ "certificate-authority": "ca.crt", "certificate-authority-data": PEM_DATA }),
      /certificate-authority-data and certificate-authority are both specified/,
    );
    assertRefused(
      single({ "insecure-skip-tls-verify": true, "certificate-authority": "ca.crt" }),
      /specifying a root certificates file with the insecure flag is not allowed/,
    );
    assertRefused(single({ "insecure-skip-tls-verify": true, "certificate-authority-data": PEM_DATA }), /with the insecure flag is not allowed/);
    assertRefused(single({ "proxy-url": "ftp://proxy" }), /invalid proxy-url "ftp:\/\/proxy"/);
    for (const proxy of ["http://p:3128", "https://p", "socks5://p:1080", "HTTP://P"])
      assert.equal(selectKubeconfigContext(single({ "proxy-url": proxy })).cluster.proxyUrl, proxy);
    for (const server of ["https://a:6443", "http://a", "a.example:6443", "10.0.0.1", "a:6443/prefix"])
      assert.equal(selectKubeconfigContext(single({ server })).cluster.server, server);
    assert.equal(selectKubeconfigContext(single({ "insecure-skip-tls-verify": true })).cluster.insecureSkipTlsVerify, true);
  });

  test("the user: certificate and key as file or data, not both; a certificate needs a key; one authentication method", () => {
    assertRefused(
      single({}, { "client-certificate": "u.crt", "client-certificate-data": PEM_DATA, "client-key": "u.key" }),
      /client-cert-data and client-cert are both specified for user "u"/,
    );
    assertRefused(
      single({}, { "client-certificate": "u.crt", "client-key": "u.key", "client-key-data": PEM_DATA }),
      /client-key-data and client-key are both specified for user "u"/,
    );
    assertRefused(
      single({}, { "client-certificate-data": PEM_DATA }),
      /client-key-data or client-key must be specified for user "u" to use the clientCert authentication method/,
    );
    assertRefused(
      single({}, { token: "t", username: "me", password: "pw" }),
      /more than one authentication method found for user "u"; found \[token basicAuth\], only one is allowed/,
    );
    assertRefused(single({}, { token: "t", password: "pw" }), /found \[token basicAuth\]/);
    // A token with a certificate, or with a token file, is not two methods to client-go.
    selectKubeconfigContext(single({}, { token: "t", "client-certificate-data": PEM_DATA, "client-key-data": PEM_DATA }));
    selectKubeconfigContext(single({}, { token: "t", tokenFile: "token" }));
  });

  test("exec: a command, an apiVersion, named env variables, no auth-provider beside it", () => {
    const exec = (fields: Record<string, unknown>) => ({ exec: { apiVersion: "client.authentication.k8s.io/v1", command: "plugin", ...fields } });
    assertRefused(single({}, exec({ command: "" })), /command must be specified for user "u" to use exec authentication plugin/);
    assertRefused(single({}, exec({ apiVersion: undefined })), /apiVersion must be specified for user "u" to use exec authentication plugin/);
    assertRefused(single({}, exec({ env: [{ value: "v" }] })), /env variable name must be specified for user "u"/);
    assertRefused(
      single({}, { ...exec({}), "auth-provider": { name: "gcp" } }),
      /authProvider cannot be provided in combination with an exec plugin for user "u"/,
    );
    // A nameless env variable of a user that is not used does not matter (client-go checks only the used one).
    const other = single({}, { token: "t" }, { users: { u: { token: "t" }, unused: exec({ env: [{ value: "v" }] }) } });
    assert.equal(selectKubeconfigContext(other).userName, "u");
  });

  test("every problem is named at once", () => {
    assertRefused(
      single({ server: "" }, { token: "t", username: "me", "client-certificate-data": PEM_DATA }),
      /no server found.*; client-key-data or client-key must.*; more than one authentication method/,
    );
  });
});

describe("loadKubeConnection", () => {
  async function write(name: string, text: string): Promise<string> {
    const file = join(dir, name);
    await mkdir(join(file, ".."), { recursive: true });
    await writeFile(file, text);
    return file;
  }
  const good = (cluster: Record<string, unknown> = {}, user: Record<string, unknown> = { token: "t" }) =>
    kubeconfigText({
      clusters: { c: { server: "https://127.0.0.1:6443", ...cluster } },
      users: { u: user },
      contexts: { x: { cluster: "c", user: "u" } },
      current: "x",
    });

  test("a kubeconfig that cannot be read, has no current-context, or names no defined cluster is refused by code", async () => {
    const missing = join(dir, "missing.yaml");
    assert.throws(() => loadKubeConnection(missing), {
      name: "KubeError",
      code: "unreadable-kubeconfig",
      message: new RegExp(`^kubeconfig ${missing}: ENOENT`),
    });
    const noContext = await write("no-context.yaml", kubeconfigText({ clusters: { c: { server: "https://a" } }, users: { u: { token: "t" } } }));
    assert.throws(() => loadKubeConnection(noContext), {
      name: "KubeError",
      code: "no-current-context",
      message: `kubeconfig ${noContext}: no current-context is set (and no context was asked for)`,
    });
    const noCluster = await write(
      "no-cluster.yaml",
      kubeconfigText({
        clusters: { c: { server: "https://a" } },
        users: { u: { token: "t" } },
        contexts: { x: { cluster: "elsewhere", user: "u" } },
        current: "x",
      }),
    );
    assert.throws(() => loadKubeConnection(noCluster), {
      name: "KubeError",
      code: "undefined-cluster",
      message: `kubeconfig ${noCluster}: context "x" names cluster "elsewhere", which is not defined`,
    });
    const connection = loadKubeConnection(await write("good.yaml", good()));
    assert.equal(connection.server, "https://127.0.0.1:6443");
    assert.equal(connection.token, "t");
    assert.equal(connection.namespace, "default");
  });

  test("several files joined with ':' are merged; --context picks another context", async () => {
    const first = await write(
      "list/first.yaml",
      kubeconfigText({ users: { u: { token: "first" } }, contexts: { other: { cluster: "c", user: "u", namespace: "ns" } } }),
    );
    const second = await write("list/second.yaml", good({}, { token: "second" }));
    const merged = loadKubeConnection(`${first}:${second}`);
    assert.equal(merged.token, "first");
    assert.equal(merged.origin, `kubeconfig ${first}:${second}, context "x"`);
    assert.equal(loadKubeConnection(`${first}::${second}`, { context: "other" }).namespace, "ns");
    assert.throws(() => loadKubeConnection(`${first}:${join(dir, "list/absent.yaml")}`), { code: "unreadable-kubeconfig" });
  });

  test("the files a context names must exist now; inline data must be base64 PEM", async () => {
    const absent = join(dir, "files", "absent");
    const refused = async (name: string, cluster: Record<string, unknown>, user: Record<string, unknown>, message: RegExp) => {
      const file = await write(`files/${name}.yaml`, good(cluster, user));
      assert.throws(() => loadKubeConnection(file), { name: "KubeError", code: "unreadable-kubeconfig", message });
    };
    await refused("ca", { "certificate-authority": "absent" }, { token: "t" }, new RegExp(`cluster "c": certificate-authority ${absent} does not exist`));
    await refused("cert", {}, { "client-certificate": "absent", "client-key-data": PEM_DATA }, new RegExp(`client-certificate ${absent} does not exist`));
    await refused("key", {}, { "client-certificate-data": PEM_DATA, "client-key": "absent" }, new RegExp(`client-key ${absent} does not exist`));
    await refused("token", {}, { tokenFile: "absent" }, new RegExp(`token file ${absent} does not exist`));
    await refused(
      "data",
      { "certificate-authority-data": Buffer.from("not pem").toString("base64") },
      { token: "t" },
      /certificate-authority-data is not base64-encoded PEM/,
    );
    await refused("provider", {}, { "auth-provider": { name: "oidc" } }, /auth-provider is not supported/);
    await refused("socks", { "proxy-url": "SOCKS5://p:1080" }, { token: "t" }, /a socks5 proxy-url is not supported/);
    await refused(
      "alpha",
      {},
      { exec: { apiVersion: "client.authentication.k8s.io/v1alpha1", command: "x" } },
      /exec plugin apiVersion "client\.authentication\.k8s\.io\/v1alpha1" is not supported/,
    );
    await refused("scheme", { server: "ftp://a" }, { token: "t" }, /server "ftp:\/\/a" is not a URL/);
    await refused("host", { server: "not a host" }, { token: "t" }, /server "not a host" is not a URL/);
    // A token beside a token file wins, and the file is not needed.
    assert.equal(loadKubeConnection(await write("files/token-wins.yaml", good({}, { token: "t", tokenFile: "absent" }))).token, "t");
    assert.throws(() => loadKubeConnection("", { env: {} }), { code: "no-kubernetes-api" }, "an empty path is no kubeconfig");
  });

  test("the connection: files and data, basic auth, impersonation, proxy, TLS name; a server without scheme gets one", async () => {
    await write("conn/ca.crt", PEM);
    const file = await write(
      "conn/config",
      good(
        { server: "api.example:6443/", "certificate-authority": "ca.crt", "tls-server-name": "kubernetes", "proxy-url": "http://127.0.0.1:3128" },
        { username: "me", password: "pw", as: "them", "client-certificate-data": PEM_DATA, "client-key-data": PEM_DATA },
      ),
    );
    const c = loadKubeConnection(file);
    assert.equal(c.server, "https://api.example:6443");
    assert.deepEqual(c.ca, { file: join(dir, "conn", "ca.crt") });
    assert.deepEqual(c.clientCert, { pem: PEM });
    assert.deepEqual(c.clientKey, { pem: PEM });
    assert.deepEqual(c.basicAuth, { username: "me", password: "pw" });
    assert.equal(c.impersonate, "them");
    assert.equal(c.proxyUrl, "http://127.0.0.1:3128");
    assert.equal(c.tlsServerName, "kubernetes");
    // Without any TLS setting a scheme-less server is http (kubectl makes every scheme-less server http: see the differential test).
    assert.equal(loadKubeConnection(await write("conn/plain", good({ server: "127.0.0.1:8080" }))).server, "http://127.0.0.1:8080");
  });

  test("without a kubeconfig: no API outside a pod, and a pod without its service account, are refused by code", async () => {
    assert.throws(() => loadKubeConnection(undefined, { env: {} }), {
      name: "KubeError",
      code: "no-kubernetes-api",
      message: /^no Kubernetes API to talk to: /,
    });
    const sa = join(dir, "serviceaccount");
    await mkdir(sa, { recursive: true });
    const env = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    assert.throws(() => loadKubeConnection(undefined, { env, serviceAccountDir: sa }), {
      name: "KubeError",
      code: "missing-service-account",
      message: new RegExp(`^running in a pod \\(KUBERNETES_SERVICE_HOST is set\\) but ${sa}/token is missing`),
    });
    await writeFile(join(sa, "token"), "sa-token\n");
    assert.throws(() => loadKubeConnection(undefined, { env, serviceAccountDir: sa }), {
      code: "missing-service-account",
      message: new RegExp(`${sa}/ca.crt is missing`),
    });
    assert.throws(() => loadKubeConnection(undefined, { env: { KUBERNETES_SERVICE_HOST: "10.96.0.1" }, serviceAccountDir: sa }), {
      code: "missing-service-account",
      message: /KUBERNETES_SERVICE_PORT is not/,
    });
    await writeFile(join(sa, "ca.crt"), PEM);
    const inPod = loadKubeConnection(undefined, { env, serviceAccountDir: sa });
    assert.deepEqual(inPod, {
      server: "https://10.96.0.1:443",
      ca: { file: `${sa}/ca.crt` },
      tokenFile: `${sa}/token`,
      insecureSkipTlsVerify: false,
      namespace: "default",
      origin: "the pod's service account",
    });
    await writeFile(join(sa, "namespace"), "imprimatur-system\n");
    const v6 = loadKubeConnection(undefined, { env: { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" }, serviceAccountDir: sa });
    assert.equal(v6.server, "https://[fd00::1]:6443");
    assert.equal(v6.namespace, "imprimatur-system");
    // A kubeconfig given wins over the pod's service account.
    assert.equal(loadKubeConnection(await write("pod/config", good()), { env, serviceAccountDir: sa }).server, "https://127.0.0.1:6443");
  });
});
