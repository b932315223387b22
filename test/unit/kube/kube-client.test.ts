// The project's Kubernetes client (src/kube/kube-client.ts) against a real kube-apiserver (test/support/kube-cluster.ts,
// started with a client CA of this test's, so that client certificates authenticate): requests and their failures
// as the API states them (404, 409 with its reason, 403 naming the RBAC rule, 401), watches, aborts, credentials
// read again from rotated files, connections shared (counted by a TCP relay on loopback in front of the apiserver),
// TLS settings, an HTTP proxy, exec plugins, and the pod's service account.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { connect, createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeApiError } from "../../../src/kube/api-requests.ts";
import { KubeClient, type KubeConnection } from "../../../src/kube/kube-client.ts";
import { loadKubeConnection } from "../../../src/kube/kube-connection.ts";
import { SecretKeyReader } from "../../../src/kube/secret-keys.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";
import { startKubeCluster, type KubeCluster } from "../../support/kube-cluster.ts";
import { recordPrivateKey, recordSecret } from "../../support/secret-ledger.ts";

const NS = "kube-client-test";
const ADMIN_CN = "imprimatur-cert-admin";
const NOBODY_CN = "imprimatur-cert-nobody";
/** The interval after which the clients of the rotation tests read their files again (the default is a minute). */
const REREAD_MS = 1_000;

let dir: string;
let cluster: KubeCluster;
let admin: KubeClient;
/** The admin kubeconfig's connection: server, the apiserver's CA, the admin token. */
let adminConnection: KubeConnection;
let apiserverCaFile: string;
let port: number;
const certs: Record<"admin" | "nobody", { certPem: string; keyPem: string }> = {} as never;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-kube-client-"));
  const clientCa = await createCertificateAuthority("kube-client test client CA");
  recordPrivateKey(clientCa.keyPem, "the test's client CA key");
  writeFileSync(join(dir, "client-ca.crt"), clientCa.certPem);
  [certs.admin, certs.nobody] = await Promise.all([
    issueCertificate(clientCa, { commonName: ADMIN_CN, client: true }),
    issueCertificate(clientCa, { commonName: NOBODY_CN, client: true }),
  ]);
  for (const pair of Object.values(certs)) recordPrivateKey(pair.keyPem, "a client certificate's key");
  cluster = await startKubeCluster({ extraArgs: [`--client-ca-file=${join(dir, "client-ca.crt")}`] });
  port = Number(new URL(cluster.url).port);
  adminConnection = loadKubeConnection(cluster.kubeconfig);
  assert.ok(adminConnection.ca && "pem" in adminConnection.ca && adminConnection.token);
  apiserverCaFile = join(dir, "apiserver-ca.crt");
  writeFileSync(apiserverCaFile, adminConnection.ca.pem);
  admin = new KubeClient(adminConnection);
  await admin.request("POST", "/api/v1/namespaces", { body: { metadata: { name: NS } } });
  await admin.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
    body: {
      metadata: { name: "kube-client-test-cert-admin" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: ADMIN_CN }],
    },
  });
});

after(async () => {
  await admin?.close();
  await cluster?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** A connection to the apiserver (or to `server`) as the admin token, with `changes`. */
function connectionWith(changes: Partial<KubeConnection>, server = cluster.url): KubeConnection {
  return { ...adminConnection, server, ...changes };
}

/** A client presenting `pair`'s certificate (inline) and no token. */
function certClient(pair: { certPem: string; keyPem: string }): KubeClient {
  const { token: _token, ...rest } = adminConnection;
  return new KubeClient({ ...rest, clientCert: { pem: pair.certPem }, clientKey: { pem: pair.keyPem } });
}

/** Asserts that `promise` rejects with a KubeApiError with these properties; returns it. */
async function rejectsWith(
  promise: Promise<unknown>,
  expected: { code: string; httpStatus?: number; reason?: string; message?: RegExp },
): Promise<KubeApiError> {
  let error: unknown;
  await assert.rejects(promise, (e: unknown) => ((error = e), true));
  assert.ok(error instanceof KubeApiError, String(error));
  assert.equal(error.code, expected.code, error.message);
  if ("httpStatus" in expected) assert.equal(error.httpStatus, expected.httpStatus, error.message);
  if ("reason" in expected) assert.equal(error.reason, expected.reason, error.message);
  if (expected.message) assert.match(error.message, expected.message);
  return error;
}

const configMaps = `/api/v1/namespaces/${NS}/configmaps`;

/** A TCP relay to the apiserver on loopback that counts the connections made through it, and those still open. */
async function countingRelay(): Promise<{ url: string; connections: () => number; open: () => number; stop: () => Promise<void> }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server: TcpServer = createTcpServer((client) => {
    connections++;
    const upstream = connect(port, "127.0.0.1");
    sockets.add(client);
    const end = () => {
      sockets.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    open: () => sockets.size,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("requests", () => {
  test("an object, a list with a query, a patch; read gives undefined for 404, request a NotFound error", async () => {
    const created = (await admin.request("POST", configMaps, { body: { metadata: { name: "first", labels: { app: "x" } }, data: { a: "1" } } })) as any;
    assert.equal(created.metadata.name, "first");
    assert.deepEqual(((await admin.read(`${configMaps}/first`)) as any).data, { a: "1" });
    const list = (await admin.read(configMaps, { query: { labelSelector: "app=x", limit: 10, absent: undefined } })) as any;
    assert.equal(list.kind, "ConfigMapList");
    assert.deepEqual(
      list.items.map((i: any) => i.metadata.name),
      ["first"],
    );
    const patched = (await admin.request("PATCH", `${configMaps}/first`, { body: { data: { b: "2" } }, contentType: "application/merge-patch+json" })) as any;
    assert.deepEqual(patched.data, { a: "1", b: "2" });
    assert.equal(await admin.read(`${configMaps}/absent`), undefined);
    assert.equal(await admin.read(`/api/v1/namespaces/no-such-namespace/configmaps/x`), undefined);
    await rejectsWith(admin.request("GET", `${configMaps}/absent`), {
      code: "unavailable",
      httpStatus: 404,
      reason: "NotFound",
      message: /configmaps "absent" not found/,
    });
    const status = (await admin.request("DELETE", `${configMaps}/first`)) as any;
    assert.equal(status.kind, "Status");
    assert.equal(admin.namespace, "default");
  });

  test("409: AlreadyExists for a second create, Conflict for an update of a stale version", async () => {
    const first = (await admin.request("POST", configMaps, { body: { metadata: { name: "conflicted" }, data: { v: "1" } } })) as any;
    await rejectsWith(admin.request("POST", configMaps, { body: { metadata: { name: "conflicted" } } }), {
      code: "unavailable",
      httpStatus: 409,
      reason: "AlreadyExists",
      message: /configmaps "conflicted" already exists/,
    });
    await admin.request("PUT", `${configMaps}/conflicted`, { body: { ...first, data: { v: "2" } } });
    await rejectsWith(admin.request("PUT", `${configMaps}/conflicted`, { body: { ...first, data: { v: "3" } } }), {
      code: "unavailable",
      httpStatus: 409,
      reason: "Conflict",
      message: /the object has been modified/,
    });
  });

  test("403 names the identity and the RBAC rule it lacks; 401 for a token the API does not know", async () => {
    const nobody = certClient(certs.nobody);
    try {
      await rejectsWith(nobody.read(configMaps), {
        code: "forbidden",
        httpStatus: 403,
        reason: "Forbidden",
        message: new RegExp(`User "${NOBODY_CN}" cannot list resource "configmaps" in API group "" in the namespace "${NS}"`),
      });
      // The same identity, impersonated by the admin.
      const impersonating = new KubeClient(connectionWith({ impersonate: NOBODY_CN }));
      await rejectsWith(impersonating.request("GET", `${configMaps}/x`), {
        code: "forbidden",
        message: new RegExp(`User "${NOBODY_CN}" cannot get resource "configmaps"`),
      });
      await impersonating.close();
      // A client certificate bound to cluster-admin works as the admin token does.
      const certAdmin = certClient(certs.admin);
      assert.equal(((await certAdmin.read(configMaps)) as any).kind, "ConfigMapList");
      await certAdmin.close();
    } finally {
      await nobody.close();
    }
    const stranger = new KubeClient(connectionWith({ token: "not-a-token-the-apiserver-knows" }));
    await rejectsWith(stranger.read("/api"), { code: "unauthorized", httpStatus: 401, reason: "Unauthorized" });
    await stranger.close();
  });

  test("a Secret's key: read; a missing key is a KubeError, a refused read a KubeApiError naming the rule", async () => {
    await admin.request("POST", `/api/v1/namespaces/${NS}/secrets`, {
      body: { metadata: { name: "keys" }, data: { "cosign.pub": Buffer.from("PEM").toString("base64") } },
    });
    const signal = new AbortController().signal;
    assert.equal(await new SecretKeyReader(admin).read({ namespace: NS, secret: "keys", key: "cosign.pub" }, signal), "PEM");
    await assert.rejects(new SecretKeyReader(admin).read({ namespace: NS, secret: "keys", key: "other.pub" }, signal), {
      name: "KubeError",
      code: "missing-secret-key",
      message: `secret ${NS}/keys has no key "other.pub"`,
    });
    const nobody = certClient(certs.nobody);
    await assert.rejects(new SecretKeyReader(nobody).read({ namespace: NS, secret: "keys", key: "cosign.pub" }, signal), {
      name: "KubeApiError",
      code: "forbidden",
      message: new RegExp(`^cannot read secret ${NS}/keys: .*secrets "keys" is forbidden: User "${NOBODY_CN}" cannot get resource "secrets"`),
    });
    await nobody.close();
  });

  test("a closed client refuses requests", async () => {
    const client = new KubeClient(adminConnection);
    await client.read("/api");
    await client.close();
    await rejectsWith(client.read("/api"), { code: "unavailable", message: /the client is closed/ });
  });
});

describe("watches and aborts", () => {
  test("a watch delivers ADDED, MODIFIED and DELETED in order, and ends when the server's timeoutSeconds is up", async () => {
    const list = (await admin.read(configMaps, { query: { fieldSelector: "metadata.name=watched" } })) as any;
    const events: Array<[string, string | undefined]> = [];
    const started = Date.now();
    const watching = admin.watch(
      configMaps,
      { fieldSelector: "metadata.name=watched", resourceVersion: list.metadata.resourceVersion, timeoutSeconds: 2 },
      (type, object) => events.push([type, (object as any)?.data?.v]),
    );
    await admin.request("POST", configMaps, { body: { metadata: { name: "watched" }, data: { v: "1" } } });
    await admin.request("PATCH", `${configMaps}/watched`, { body: { data: { v: "2" } }, contentType: "application/merge-patch+json" });
    await admin.request("DELETE", `${configMaps}/watched`);
    await watching;
    const elapsed = Date.now() - started;
    assert.deepEqual(events, [
      ["ADDED", "1"],
      ["MODIFIED", "2"],
      ["DELETED", "2"],
    ]);
    assert.ok(elapsed >= 1_500 && elapsed < 10_000, `the watch ended after ${elapsed} ms`);
  });

  test("a watch the API refuses rejects with its status; one whose handler throws rejects", async () => {
    const nobody = certClient(certs.nobody);
    await rejectsWith(
      nobody.watch(configMaps, {}, () => assert.fail("no event")),
      { code: "forbidden", httpStatus: 403, message: /cannot watch resource "configmaps"/ },
    );
    await nobody.close();
    await admin.request("POST", configMaps, { body: { metadata: { name: "handler-throws" } } });
    await assert.rejects(
      admin.watch(configMaps, { fieldSelector: "metadata.name=handler-throws", timeoutSeconds: 30 }, () => {
        throw new Error("the handler gave up");
      }),
      /the handler gave up/,
    );
  });

  test("aborting a watch, or a request, ends it with code aborted", async () => {
    const controller = new AbortController();
    const started = Date.now();
    const watching = admin.watch(configMaps, { timeoutSeconds: 60 }, () => undefined, controller.signal);
    setTimeout(() => controller.abort(new Error("enough")), 300);
    await rejectsWith(watching, { code: "aborted", message: /enough/ });
    assert.ok(Date.now() - started < 5_000);
    await rejectsWith(admin.read("/api", { signal: AbortSignal.abort(new Error("before it started")) }), { code: "aborted", message: /before it started/ });
    // A request whose answer is slow (a watch read as one answer) aborted while it waits.
    const waiting = new AbortController();
    setTimeout(() => waiting.abort(new Error("too slow")), 300);
    await rejectsWith(admin.request("GET", configMaps, { query: { watch: true, timeoutSeconds: 30 }, signal: waiting.signal }), {
      code: "aborted",
      message: /too slow/,
    });
  });
});

describe("credentials and connections", () => {
  test("a token file is read again once the interval (default one minute) is over, and kept while it cannot be read", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "not-a-token-the-apiserver-knows\n");
    const { token: _token, ...noToken } = adminConnection;
    const client = new KubeClient({ ...noToken, tokenFile }, { fileRereadMs: REREAD_MS });
    const byDefault = new KubeClient({ ...noToken, tokenFile });
    try {
      await rejectsWith(client.read("/api"), { code: "unauthorized", httpStatus: 401 });
      await rejectsWith(byDefault.read("/api"), { code: "unauthorized" });
      writeFileSync(tokenFile, `${adminConnection.token}\n`);
      await rejectsWith(client.read("/api"), { code: "unauthorized" }); // read less than the interval ago
      await sleep(REREAD_MS + 100);
      assert.equal(((await client.read("/api")) as any).kind, "APIVersions");
      // A minute has not passed for the default client: still the old token.
      await rejectsWith(byDefault.read("/api"), { code: "unauthorized" });
      rmSync(tokenFile);
      await sleep(REREAD_MS + 100);
      assert.equal(((await client.read("/api")) as any).kind, "APIVersions", "the token read last stays while the file is gone");
      const fresh = new KubeClient({ ...noToken, tokenFile });
      await rejectsWith(fresh.read("/api"), { code: "unauthorized", message: /cannot read the token file/ });
      await fresh.close();
    } finally {
      await client.close();
      await byDefault.close();
    }
  });

  test("requests share one connection: in turn, in a burst, and in a burst that is a new client's first (HTTP/2)", async () => {
    // kube-apiserver negotiates HTTP/2, so one connection carries every request of a pool.
    const relay = await countingRelay();
    const client = new KubeClient(connectionWith({}, relay.url));
    try {
      for (let i = 0; i < 20; i++) await client.read("/api");
      assert.equal(relay.connections(), 1, "20 requests in turn, one connection");
      const burst = await Promise.all(Array.from({ length: 25 }, () => client.read(configMaps)));
      assert.equal(burst.length, 25);
      assert.equal(relay.connections(), 1, "25 requests at once, the same connection");
    } finally {
      await client.close();
    }
    // The first requests of a client, all at once (the watches at start-up), share the one pool they wait for.
    const fresh = new KubeClient(connectionWith({}, relay.url));
    try {
      await Promise.all(Array.from({ length: 25 }, () => fresh.read("/api")));
      assert.equal(relay.connections(), 2, "a new client's first 25 requests at once, one new connection");
    } finally {
      await fresh.close();
      await relay.stop();
    }
  });

  test("client certificate files that change are read again after the interval, and get a new pool; the old one closes", async () => {
    const relay = await countingRelay();
    const certFile = join(dir, "client.crt");
    const keyFile = join(dir, "client.key");
    writeFileSync(certFile, certs.admin.certPem);
    writeFileSync(keyFile, certs.admin.keyPem);
    const { token: _token, ...noToken } = adminConnection;
    const client = new KubeClient(
      { ...noToken, server: relay.url, ca: { file: apiserverCaFile }, clientCert: { file: certFile }, clientKey: { file: keyFile } },
      { fileRereadMs: REREAD_MS },
    );
    try {
      for (let i = 0; i < 3; i++) assert.equal(((await client.read(configMaps)) as any).kind, "ConfigMapList");
      assert.equal(relay.connections(), 1);
      writeFileSync(certFile, certs.nobody.certPem);
      writeFileSync(keyFile, certs.nobody.keyPem);
      assert.equal(((await client.read(configMaps)) as any).kind, "ConfigMapList", "within the interval: the files are not read again");
      await sleep(REREAD_MS + 100);
      await rejectsWith(client.read(configMaps), { code: "forbidden", message: new RegExp(`User "${NOBODY_CN}"`) });
      assert.equal(relay.connections(), 2, "the new certificate, a new connection");
      for (let i = 0; i < 3; i++) await rejectsWith(client.read(configMaps), { code: "forbidden" });
      assert.equal(relay.connections(), 2, "the new pool's connection is used again");
      for (let i = 0; i < 50 && relay.open() > 1; i++) await sleep(20);
      assert.equal(relay.open(), 1, "the old pool's connection was closed");
      // Files read again that did not change keep the pool.
      await sleep(REREAD_MS + 100);
      await rejectsWith(client.read(configMaps), { code: "forbidden" });
      assert.equal(relay.connections(), 2);
    } finally {
      await client.close();
      await relay.stop();
    }
  });

  test("TLS: the CA is checked, tls-server-name is sent and checked, insecure-skip-tls-verify checks nothing", async () => {
    const { ca: _ca, ...noCa } = adminConnection;
    const check = async (changes: Partial<KubeConnection>) => {
      const client = new KubeClient({ ...noCa, ...changes });
      try {
        return await client.read("/api");
      } finally {
        await client.close();
      }
    };
    assert.equal(((await check({ ca: { file: apiserverCaFile }, tlsServerName: "kubernetes.default.svc" })) as any).kind, "APIVersions");
    await rejectsWith(check({ ca: { file: apiserverCaFile }, tlsServerName: "elsewhere.example" }), { code: "unavailable", message: /elsewhere\.example/ });
    await rejectsWith(check({}), { code: "unavailable", message: /certificate/ });
    const other = await createCertificateAuthority("not the apiserver's CA");
    await rejectsWith(check({ ca: { pem: other.certPem } }), { code: "unavailable", message: /certificate/ });
    assert.equal(((await check({ insecureSkipTlsVerify: true })) as any).kind, "APIVersions");
  });

  test("a proxy-url: requests are tunnelled through the HTTP proxy (CONNECT)", async () => {
    const tunnels: string[] = [];
    const proxy: HttpServer = createHttpServer((_req, res) => res.writeHead(405).end());
    proxy.on("connect", (req, client: Socket, head: Buffer) => {
      tunnels.push(req.url ?? "");
      const [host, targetPort] = (req.url ?? "").split(":");
      const upstream = connect(Number(targetPort), host, () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        upstream.write(head);
        upstream.pipe(client).pipe(upstream);
      });
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    const client = new KubeClient(connectionWith({ proxyUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` }));
    try {
      for (let i = 0; i < 3; i++) assert.equal(((await client.read("/api")) as any).kind, "APIVersions");
      assert.deepEqual(tunnels, [`127.0.0.1:${port}`], "one tunnel, used for every request");
    } finally {
      await client.close();
      proxy.closeAllConnections();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
  });

  test("exec plugins: a token, and a client certificate, from a plugin", async () => {
    const pluginDir = join(dir, "exec");
    mkdirSync(pluginDir, { recursive: true });
    const plugin = (name: string, status: Record<string, unknown>) => {
      const path = join(pluginDir, name);
      const output = JSON.stringify({ apiVersion: "client.authentication.k8s.io/v1", kind: "ExecCredential", status });
      writeFileSync(path, `#!/bin/sh\ncat <<'EOF'\n${output}\nEOF\n`);
      chmodSync(path, 0o755);
      return path;
    };
    const kubeconfig = (name: string, command: string) => {
      const path = join(pluginDir, `${name}.kubeconfig`);
      writeFileSync(
        path,
        JSON.stringify({
          clusters: [{ name: "c", cluster: { server: cluster.url, "certificate-authority": apiserverCaFile } }],
          users: [{ name: "u", user: { exec: { apiVersion: "client.authentication.k8s.io/v1", command } } }],
          contexts: [{ name: "x", context: { cluster: "c", user: "u", namespace: NS } }],
          "current-context": "x",
        }),
      );
      return path;
    };
    const tokenClient = new KubeClient(loadKubeConnection(kubeconfig("token", plugin("token-plugin", { token: adminConnection.token })), {}));
    const certClientFromPlugin = new KubeClient(
      loadKubeConnection(kubeconfig("cert", plugin("cert-plugin", { clientCertificateData: certs.nobody.certPem, clientKeyData: certs.nobody.keyPem }))),
    );
    try {
      assert.equal(tokenClient.namespace, NS);
      assert.equal(((await tokenClient.read(configMaps)) as any).kind, "ConfigMapList");
      await rejectsWith(certClientFromPlugin.read(configMaps), { code: "forbidden", message: new RegExp(`User "${NOBODY_CN}"`) });
    } finally {
      await tokenClient.close();
      await certClientFromPlugin.close();
    }
  });

  test("in a pod: the service account's token and CA from its folder, the namespace from its file", async () => {
    await admin.request("POST", `/api/v1/namespaces/${NS}/serviceaccounts`, { body: { metadata: { name: "in-cluster" } } });
    // A Role of its own: the aggregated "view" ClusterRole gets its rules from kube-controller-manager, absent here.
    await admin.request("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`, {
      body: { metadata: { name: "configmap-reader" }, rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list"] }] },
    });
    await admin.request("POST", `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`, {
      body: {
        metadata: { name: "in-cluster-reader" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "configmap-reader" },
        subjects: [{ kind: "ServiceAccount", name: "in-cluster", namespace: NS }],
      },
    });
    const review = (await admin.request("POST", `/api/v1/namespaces/${NS}/serviceaccounts/in-cluster/token`, {
      body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } },
    })) as any;
    const token = review.status.token as string;
    recordSecret("a service account token", token);
    const serviceAccountDir = join(dir, "serviceaccount");
    mkdirSync(serviceAccountDir);
    writeFileSync(join(serviceAccountDir, "token"), token);
    writeFileSync(join(serviceAccountDir, "ca.crt"), adminConnection.ca && "pem" in adminConnection.ca ? adminConnection.ca.pem : "");
    writeFileSync(join(serviceAccountDir, "namespace"), NS);
    const client = new KubeClient(
      loadKubeConnection(undefined, { env: { KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: String(port) }, serviceAccountDir }),
    );
    try {
      assert.equal(client.namespace, NS);
      assert.equal(client.connection.server, cluster.url);
      assert.equal(((await client.read(`/api/v1/namespaces/${client.namespace}/configmaps`)) as any).kind, "ConfigMapList");
      await rejectsWith(client.read("/api/v1/namespaces/default/configmaps"), {
        code: "forbidden",
        message: new RegExp(`User "system:serviceaccount:${NS}:in-cluster" cannot list resource "configmaps" in API group "" in the namespace "default"`),
      });
    } finally {
      await client.close();
    }
  });
});
