// The Kubernetes client's requests share connections (src/kube/pooled-kube-config.ts). The server here is a small
// HTTPS server, not kube-apiserver: the test counts TLS connections per client, which kube-apiserver does not
// report; every end-to-end test talks to a real kube-apiserver through the same class.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { loadKubeConfig } from "../../../src/kube/kube-config.ts";
import { PooledKubeConfig } from "../../../src/kube/pooled-kube-config.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";

let dir: string;
let server: Server;
let caFile: string;
let caPem: string;
let connections = 0;
let open = 0;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-pooled-kube-config-"));
  const ca = await createCertificateAuthority("pooled-kube-config test CA");
  const leaf = await issueCertificate(ca, { commonName: "127.0.0.1", ipAddresses: ["127.0.0.1"] });
  caPem = ca.certPem;
  caFile = join(dir, "ca.crt");
  await writeFile(caFile, caPem);
  server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (req, res) => {
    const name = decodeURIComponent((req.url ?? "").split("/").pop() ?? "");
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name } }));
  });
  server.on("secureConnection", (socket) => {
    connections++;
    open++;
    socket.on("close", () => open--);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

async function kubeconfigFile(): Promise<string> {
  const { port } = server.address() as AddressInfo;
  const file = join(dir, "kubeconfig");
  await writeFile(
    file,
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: c",
      "  cluster:",
      `    server: https://127.0.0.1:${port}`,
      `    certificate-authority: ${caFile}`,
      "users:",
      "- name: u",
      "  user:",
      "    token: t",
      "contexts:",
      "- name: x",
      "  context: {cluster: c, user: u}",
      "current-context: x",
      "",
    ].join("\n"),
  );
  return file;
}

async function readNamespaces(kc: KubeConfig, n: number): Promise<void> {
  const api = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < n; i++) assert.equal((await api.readNamespace({ name: `ns-${i}` })).metadata?.name, `ns-${i}`);
}

test("loadKubeConfig's requests share connections; the library's own KubeConfig opens one per request", async () => {
  const file = await kubeconfigFile();
  const pooled = loadKubeConfig(file);
  assert.ok(pooled instanceof PooledKubeConfig);
  connections = 0;
  await readNamespaces(pooled, 10);
  // undici may open a second connection while the first answer is being read; after that, none.
  assert.ok(connections <= 2, `ten requests, ${connections} connections`);
  const first = connections;
  await readNamespaces(pooled, 10);
  assert.equal(connections, first, "ten more requests, no new connection");
  server.closeAllConnections();

  // Why the class exists: @kubernetes/client-node 2.x makes a new Agent, hence a new connection, per request.
  const plain = new KubeConfig();
  plain.loadFromFile(file);
  connections = 0;
  await readNamespaces(plain, 10);
  assert.equal(connections, 10);
  server.closeAllConnections();
});

test("a CA file that changes gets a new connection pool; the old one is closed", async () => {
  const file = await kubeconfigFile();
  const kc = loadKubeConfig(file);
  await readNamespaces(kc, 3);
  const openBefore = open;
  connections = 0;
  await writeFile(caFile, caPem + "\n"); // the same CA, but other bytes: what a rotation looks like to the client
  await readNamespaces(kc, 6);
  assert.ok(connections >= 1 && connections <= 2, `the new material, new connections (${connections}), shared by the requests after it`);
  const afterRotation = connections;
  await readNamespaces(kc, 6);
  assert.equal(connections, afterRotation);
  // The previous pool closes its idle connections.
  for (let i = 0; i < 50 && open > afterRotation; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(open <= afterRotation && openBefore >= 1, `${open} open: the old pool's connections are closed`);
  server.closeAllConnections();
  await writeFile(caFile, caPem);
});

test("a user whose credentials come from an exec plugin keeps the library's behaviour", async () => {
  const kc = new PooledKubeConfig();
  kc.loadFromString(
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, "certificate-authority": caFile } }],
      users: [{ name: "u", user: { exec: { apiVersion: "client.authentication.k8s.io/v1", command: "true" } } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  assert.equal((kc as unknown as { tlsIdentity(): string | undefined }).tlsIdentity(), undefined);
});
