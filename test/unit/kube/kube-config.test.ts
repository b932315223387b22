// Where the Kubernetes API is (src/kube/kube-config.ts) and the keys read from Secrets (src/kube/secret-keys.ts):
// each way of having no usable API, and each way a Secret's key cannot be had, is refused by code with a message
// that says what to fix.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { loadKubeConfig } from "../../../src/kube/kube-config.ts";
import { SecretKeyReader } from "../../../src/kube/secret-keys.ts";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-kube-config-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const CLUSTER = "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\nusers:\n- name: u\n  user:\n    token: t\n";

async function kubeconfig(name: string, text: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, text);
  return file;
}

/** Runs `body` with KUBERNETES_SERVICE_HOST set to `value` (unset for undefined), restoring it after. */
function withServiceHost<T>(value: string | undefined, body: () => T): T {
  const saved = process.env.KUBERNETES_SERVICE_HOST;
  if (value === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
  else process.env.KUBERNETES_SERVICE_HOST = value;
  try {
    return body();
  } finally {
    if (saved === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
    else process.env.KUBERNETES_SERVICE_HOST = saved;
  }
}

test("a kubeconfig that cannot be read, has no current-context, or names no defined cluster is refused by code", async () => {
  const missing = join(dir, "missing.yaml");
  assert.throws(() => loadKubeConfig(missing), { name: "KubeError", code: "unreadable-kubeconfig", message: new RegExp(`^kubeconfig ${missing}: `) });

  const noContext = await kubeconfig("no-context.yaml", CLUSTER);
  assert.throws(() => loadKubeConfig(noContext), {
    name: "KubeError",
    code: "no-current-context",
    message: `kubeconfig ${noContext}: no current-context is set`,
  });

  const noCluster = await kubeconfig(
    "no-cluster.yaml",
    `${CLUSTER}contexts:\n- name: x\n  context:\n    cluster: elsewhere\n    user: u\ncurrent-context: x\n`,
  );
  assert.throws(() => loadKubeConfig(noCluster), {
    name: "KubeError",
    code: "undefined-cluster",
    message: `kubeconfig ${noCluster}: current-context "x" names no defined cluster`,
  });

  const good = await kubeconfig("good.yaml", `${CLUSTER}contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n`);
  assert.equal(loadKubeConfig(good).getCurrentCluster()?.server, "https://127.0.0.1:6443");
});

test("without a kubeconfig: no API outside a pod, and a pod without its service account, are refused by code", () => {
  withServiceHost(undefined, () =>
    assert.throws(() => loadKubeConfig(), { name: "KubeError", code: "no-kubernetes-api", message: /^no Kubernetes API to read namespace labels from: / }),
  );
  // In a pod whose service account is not mounted (as here, outside one).
  if (existsSync("/var/run/secrets/kubernetes.io/serviceaccount/token")) return;
  withServiceHost("10.96.0.1", () =>
    assert.throws(() => loadKubeConfig(""), {
      name: "KubeError",
      code: "missing-service-account",
      message: /^running in a pod \(KUBERNETES_SERVICE_HOST is set\) but \/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/token is missing/,
    }),
  );
});

test("a Secret's key: a refused read is a KubeApiError with the API's code, a missing key a KubeError", async () => {
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith("/api/v1/namespaces/sig/secrets/keys")) {
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "keys", namespace: "sig" },
          data: { "cosign.pub": Buffer.from("PEM").toString("base64") },
        }),
      );
      return;
    }
    res.statusCode = 403;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ apiVersion: "v1", kind: "Status", status: "Failure", reason: "Forbidden", message: 'secrets "hidden" is forbidden', code: 403 }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const kube = new KubeConfig();
    kube.loadFromOptions({
      clusters: [{ name: "c", server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
      users: [{ name: "u", token: "t" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
    const reader = new SecretKeyReader(kube);
    const signal = new AbortController().signal;
    assert.equal(await reader.read({ namespace: "sig", secret: "keys", key: "cosign.pub" }, signal), "PEM");
    await assert.rejects(reader.read({ namespace: "sig", secret: "keys", key: "other.pub" }, signal), {
      name: "KubeError",
      code: "missing-secret-key",
      message: 'secret sig/keys has no key "other.pub"',
    });
    await assert.rejects(reader.read({ namespace: "sig", secret: "hidden", key: "cosign.pub" }, signal), {
      name: "KubeApiError",
      code: "forbidden",
      message: 'cannot read secret sig/hidden: HTTP 403: secrets "hidden" is forbidden',
    });
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});
