import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { stringify } from "yaml";
import { KubeconfigError, loadWebhookKubeconfig, webhookDispatcher } from "../../src/backends/kubeconfig.ts";
import type { KubeconfigErrorCode, WebhookTarget } from "../../src/backends/kubeconfig.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";

let root: string;
let ca: { certPem: string; keyPem: string };
let serving: { certPem: string; keyPem: string };
let client: { certPem: string; keyPem: string };

before(async () => {
  root = await mkdtemp(join(tmpdir(), "imprimatur-kubeconfig-"));
  ca = await createCertificateAuthority("webhook-test-ca");
  // Only a DNS name: reaching it on 127.0.0.1 needs tls-server-name.
  serving = await issueCertificate(ca, { commonName: "webhook", dnsNames: ["webhook.imprimatur.svc"] });
  client = await issueCertificate(ca, { commonName: "kube-apiserver", client: true });
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

const b64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");

function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown> | null, extra: Record<string, unknown> = {}): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "webhook", cluster }],
    users: user === null ? [] : [{ name: "apiserver", user }],
    contexts: [{ name: "default", context: { cluster: "webhook", ...(user === null ? {} : { user: "apiserver" }) } }],
    "current-context": "default",
    ...extra,
  });
}

async function writeIn(dir: string, name: string, text: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, name);
  await writeFile(file, text);
  return file;
}

test("inline certificate-authority-data and client certificate data", async () => {
  const file = await writeIn(
    join(root, "inline"),
    "kubeconfig",
    kubeconfig(
      {
        server: "https://127.0.0.1:8443/imagepolicy",
        "certificate-authority-data": b64(ca.certPem),
        "tls-server-name": "webhook.imprimatur.svc",
      },
      { "client-certificate-data": b64(client.certPem), "client-key-data": b64(client.keyPem) },
    ),
  );
  const target = await loadWebhookKubeconfig(file);
  assert.deepEqual(target, {
    url: "https://127.0.0.1:8443/imagepolicy",
    ca: ca.certPem,
    cert: client.certPem,
    key: client.keyPem,
    insecureSkipTLSVerify: false,
    serverName: "webhook.imprimatur.svc",
  });
});

test("file paths are relative to the kubeconfig folder, not the working directory", async () => {
  const dir = join(root, "relative", "conf");
  await writeIn(join(dir, "pki"), "ca.crt", ca.certPem);
  await writeIn(join(dir, "pki"), "client.crt", client.certPem);
  await writeIn(join(dir, "pki"), "client.key", client.keyPem);
  await writeIn(dir, "token", "file-token-123\n");
  const file = await writeIn(
    dir,
    "webhook.kubeconfig",
    kubeconfig(
      { server: "https://webhook.imprimatur.svc/review", "certificate-authority": "pki/ca.crt" },
      { "client-certificate": "pki/client.crt", "client-key": "./pki/client.key", "token-file": "token" },
    ),
  );
  assert.notEqual(process.cwd(), dir);
  const target = await loadWebhookKubeconfig(file);
  assert.equal(target.url, "https://webhook.imprimatur.svc/review");
  assert.equal(target.ca, ca.certPem);
  assert.equal(target.cert, client.certPem);
  assert.equal(target.key, client.keyPem);
  assert.equal(target.token, "file-token-123");
  assert.equal(target.insecureSkipTLSVerify, false);
  assert.equal(target.serverName, undefined);

  // An absolute path is used as it is.
  const absolute = await writeIn(
    join(root, "relative", "elsewhere"),
    "kubeconfig",
    kubeconfig({ server: "https://webhook.imprimatur.svc/", "certificate-authority": join(dir, "pki", "ca.crt") }, null),
  );
  const noUser = await loadWebhookKubeconfig(absolute);
  assert.equal(noUser.ca, ca.certPem);
  assert.equal(noUser.cert, undefined);
  assert.equal(noUser.token, undefined);
});

test("a bearer token, insecure-skip-tls-verify, and the only context when current-context is unset", async () => {
  const file = await writeIn(
    join(root, "token"),
    "kubeconfig",
    stringify({
      clusters: [{ name: "c", cluster: { server: "https://10.0.0.5:9443/authorize", "insecure-skip-tls-verify": true } }],
      users: [{ name: "u", user: { token: "sekret", "token-file": "does-not-exist" } }],
      contexts: [{ name: "only", context: { cluster: "c", user: "u" } }],
    }),
  );
  const target = await loadWebhookKubeconfig(file);
  // As documented for kubeconfig, token wins over token-file (which is therefore not read).
  assert.deepEqual(target, { url: "https://10.0.0.5:9443/authorize", token: "sekret", insecureSkipTLSVerify: true });
});

test("read as client-go reads it: YAML 1.1 booleans, anchors and merge keys; a duplicate key names its line", async () => {
  const dir = join(root, "yaml-1.1");
  const file = await writeIn(
    dir,
    "kubeconfig",
    [
      "clusters:",
      "- name: c",
      "  cluster: &base {server: 'https://10.0.0.5:9443/authorize', insecure-skip-tls-verify: yes}",
      "- name: d",
      "  cluster: {<<: *base, server: 'https://10.0.0.6:9443/authorize'}",
      "users: [{name: u, user: {token: sekret}}]",
      "contexts: [{name: only, context: {cluster: d, user: u}}]",
      "",
    ].join("\n"),
  );
  assert.deepEqual(await loadWebhookKubeconfig(file), { url: "https://10.0.0.6:9443/authorize", token: "sekret", insecureSkipTLSVerify: true });
  const twice = await writeIn(dir, "twice", "clusters: []\nusers: []\nclusters: []\n");
  await assert.rejects(loadWebhookKubeconfig(twice), (e: KubeconfigError) => {
    assert.equal(e.message, `kubeconfig ${twice}: not valid YAML (line 3): duplicate key "clusters" (first on line 1)`);
    return true;
  });
});

test("the current context picks the cluster and user among several", async () => {
  const file = await writeIn(
    join(root, "several"),
    "kubeconfig",
    stringify({
      clusters: [
        { name: "a", cluster: { server: "https://a.example/" } },
        { name: "b", cluster: { server: "https://b.example/hook" } },
      ],
      users: [
        { name: "ua", user: { token: "ta" } },
        { name: "ub", user: { token: "tb" } },
      ],
      contexts: [
        { name: "ca", context: { cluster: "a", user: "ua" } },
        { name: "cb", context: { cluster: "b", user: "ub" } },
      ],
      "current-context": "cb",
    }),
  );
  const target = await loadWebhookKubeconfig(file);
  assert.equal(target.url, "https://b.example/hook");
  assert.equal(target.token, "tb");
});

/** Asserts that loading `file` fails with a message naming it and matching `pattern`. */
async function rejectsNaming(file: string, pattern: RegExp, code: KubeconfigErrorCode = "invalid"): Promise<void> {
  await assert.rejects(loadWebhookKubeconfig(file), (err: Error) => {
    assert.ok(err instanceof KubeconfigError, `not a KubeconfigError: ${err}`);
    assert.equal(err.code, code, err.message);
    assert.ok(err.message.includes(file), `message should name ${file}: ${err.message}`);
    assert.match(err.message, pattern);
    return true;
  });
}

test("problems are errors that name the kubeconfig file", async () => {
  const dir = join(root, "errors");
  await rejectsNaming(join(dir, "missing.kubeconfig"), /cannot read the file: .*ENOENT/, "unreadable");
  await rejectsNaming(
    await writeIn(
      dir,
      "no-clusters",
      stringify({ clusters: [], users: [], contexts: [{ name: "x", context: { cluster: "nowhere" } }], "current-context": "x" }),
    ),
    /defines no clusters/,
  );
  await rejectsNaming(await writeIn(dir, "empty", ""), /empty or not a YAML mapping/);
  await rejectsNaming(await writeIn(dir, "bad-yaml", "clusters: [\n"), /not valid YAML/);
  await rejectsNaming(await writeIn(dir, "no-server", stringify({ clusters: [{ name: "c", cluster: {} }] })), /server is missing/);
  await rejectsNaming(await writeIn(dir, "no-context", stringify({ clusters: [{ name: "c", cluster: { server: "https://x" } }] })), /defines no contexts/);
  await rejectsNaming(await writeIn(dir, "bad-current", kubeconfig({ server: "https://x" }, null, { "current-context": "nope" })), /current-context "nope"/);
  const missingCa = await writeIn(dir, "missing-ca", kubeconfig({ server: "https://x", "certificate-authority": "pki/none.crt" }, null));
  await rejectsNaming(
    missingCa,
    new RegExp(`cannot read cluster "webhook": certificate-authority ${join(dir, "pki", "none.crt").replaceAll("/", "\\/")}`),
    "unreadable",
  );
  await rejectsNaming(
    await writeIn(dir, "missing-token", kubeconfig({ server: "https://x" }, { "token-file": "no-token" })),
    /token-file .*no-token/,
    "unreadable",
  );
  await rejectsNaming(
    await writeIn(dir, "half-cert", kubeconfig({ server: "https://x" }, { "client-certificate-data": b64(client.certPem) })),
    /both a certificate and a key/,
  );
  await rejectsNaming(
    await writeIn(
      dir,
      "wrong-key",
      kubeconfig({ server: "https://x" }, { "client-certificate-data": b64(client.certPem), "client-key-data": b64(serving.keyPem) }),
    ),
    /does not belong/,
  );
  await rejectsNaming(
    await writeIn(
      dir,
      "insecure-and-ca",
      kubeconfig({ server: "https://x", "insecure-skip-tls-verify": true, "certificate-authority-data": b64(ca.certPem) }, null),
    ),
    /insecure-skip-tls-verify cannot be combined/,
  );
  await rejectsNaming(await writeIn(dir, "not-url", kubeconfig({ server: "not a url" }, null)), /is not a URL/);
  await rejectsNaming(
    await writeIn(dir, "exec", kubeconfig({ server: "https://x" }, { exec: { command: "x", apiVersion: "client.authentication.k8s.io/v1" } })),
    /exec/,
    "unsupported",
  );
});

test("mutual TLS round trip through webhookDispatcher; without the client certificate the handshake fails", async () => {
  const seen: { cn: string; path: string; authorization: string | undefined; body: string }[] = [];
  const server = createServer({ cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true }, (req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (body += chunk));
    req.on("end", () => {
      const peer = (req.socket as import("node:tls").TLSSocket).getPeerCertificate();
      seen.push({ cn: String(peer.subject?.CN), path: req.url ?? "", authorization: req.headers.authorization, body });
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ status: { allowed: true } }));
    });
  });
  const tlsErrors: Error[] = [];
  server.on("tlsClientError", (err: Error) => tlsErrors.push(err));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  const dir = join(root, "mtls");
  await writeIn(join(dir, "certs"), "ca.pem", ca.certPem);
  await writeIn(join(dir, "certs"), "apiserver.pem", client.certPem);
  await writeIn(join(dir, "certs"), "apiserver-key.pem", client.keyPem);
  const file = await writeIn(
    dir,
    "imagepolicy.kubeconfig",
    kubeconfig(
      { server: `https://127.0.0.1:${port}/imagepolicy`, "certificate-authority": "certs/ca.pem", "tls-server-name": "webhook.imprimatur.svc" },
      { "client-certificate": "certs/apiserver.pem", "client-key": "certs/apiserver-key.pem", token: "tok" },
    ),
  );

  const target = await loadWebhookKubeconfig(file);
  const dispatcher = webhookDispatcher(target, { connections: 2 });
  const withoutClientCert: WebhookTarget = { ...target, cert: undefined, key: undefined };
  const anonymous = webhookDispatcher(withoutClientCert);
  try {
    const post = async (d: typeof dispatcher): Promise<{ statusCode: number; json: unknown }> => {
      const res = await request(target.url, {
        method: "POST",
        dispatcher: d,
        headers: { "content-type": "application/json", authorization: `Bearer ${target.token}` },
        body: JSON.stringify({ kind: "ImageReview" }),
      });
      return { statusCode: res.statusCode, json: await res.body.json() };
    };
    for (let i = 0; i < 2; i++) {
      const res = await post(dispatcher);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json, { status: { allowed: true } });
    }
    assert.equal(seen.length, 2);
    assert.deepEqual(seen[0], { cn: "kube-apiserver", path: "/imagepolicy", authorization: "Bearer tok", body: '{"kind":"ImageReview"}' });

    await assert.rejects(post(anonymous), (err: NodeJS.ErrnoException) => {
      // TLS 1.3: the client finishes first, so it sees the server's alert or the closed socket.
      assert.match(String(err.code), /UND_ERR_SOCKET|ECONNRESET|ERR_SSL/);
      return true;
    });
    assert.equal(seen.length, 2, "the server must not see a request without a client certificate");
    assert.equal(tlsErrors.length, 1);
    assert.match(tlsErrors[0]!.message, /peer did not return a certificate|certificate required/i);
  } finally {
    await dispatcher.close();
    await anonymous.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
