// serve's --tls-secret flags: what is refused before any cluster is asked, and the defaults of the Lease and the
// webhook configuration; and the HTTPS server taking a new certificate without a restart.
import { test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { KubeClient } from "../../../src/kube/kube-client.ts";
import { startApp } from "../../../src/server/app.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";
import { DEFAULT_TLS_ROTATION } from "../../../src/tls/tls-rotation-plan.ts";
import { selfManagedTlsFromFlags, selfManagedTlsSetup, tlsSecretFlagProblem } from "../../../src/tls/tls-secret-flags.ts";
import { parseSecretName, SelfManagedTls } from "../../../src/tls/tls-secret-manager.ts";
import type { WebhookCaBundleClient } from "../../../src/kube/webhook-ca-bundle.ts";
import { runServe } from "../../../src/cli/serve.ts";

const POLICIES = fileURLToPath(new URL("../../fixtures/e2e-policies", import.meta.url));

/** A client no request is made with. */
const unusedKube = () => new KubeClient({ server: "https://127.0.0.1:1", insecureSkipTlsVerify: false, namespace: "default", origin: "test" });

test("--tls-secret is NAMESPACE/NAME", () => {
  assert.deepEqual(parseSecretName("imprimatur/imprimatur-tls"), { namespace: "imprimatur", name: "imprimatur-tls" });
  for (const bad of ["imprimatur-tls", "a/b/c", "Imprimatur/tls", "/tls", "ns/", "ns/-tls"])
    assert.throws(() => parseSecretName(bad), { name: "TlsError", code: "invalid-secret-name", message: /--tls-secret must be NAMESPACE\/NAME/ }, bad);
});

test("flag combinations refused before the cluster is asked", () => {
  assert.equal(tlsSecretFlagProblem({}, false), undefined);
  assert.equal(tlsSecretFlagProblem({ "tls-secret": "ns/tls" }, false), undefined);
  assert.equal(tlsSecretFlagProblem({ "tls-secret": "ns/tls" }, true), "--tls-secret and --tls-cert/--tls-key are alternatives");
  assert.equal(tlsSecretFlagProblem({ "webhook-configuration": "x" }, false), "--webhook-configuration needs --tls-secret");
  assert.equal(tlsSecretFlagProblem({ "leader-election-id": "x" }, false), "--leader-election-id needs --tls-secret");
  assert.match(tlsSecretFlagProblem({ "tls-secret": "tls" }, false)!, /NAMESPACE\/NAME/);
  assert.match(
    tlsSecretFlagProblem({ "tls-secret": "ns/tls", "leader-election-namespace": "Bad_NS" }, false)!,
    /--leader-election-namespace must be a lowercase DNS name/,
  );
  assert.match(tlsSecretFlagProblem({ "tls-secret": "ns/tls", "tls-timeline": "ca=1s" }, false)!, /--tls-timeline/);
  assert.match(tlsSecretFlagProblem({ "tls-secret": "ns/tls", "tls-sync-interval": "0" }, false)!, /--tls-sync-interval must be a positive duration/);
});

test("self-managed TLS needs --tls-secret, the Kubernetes API and rotation settings that fit together", async () => {
  const logger = pino({ level: "silent" });
  await assert.rejects(selfManagedTlsFromFlags({}, unusedKube(), [], logger), {
    name: "TlsError",
    code: "missing-secret",
    message: "--tls-secret is not given",
  });
  await assert.rejects(selfManagedTlsFromFlags({ "tls-secret": "ns/tls" }, undefined, [], logger), {
    name: "TlsError",
    code: "needs-kubernetes-api",
    message: "--tls-secret needs the Kubernetes API: give --kubeconfig, or run in a pod",
  });
  assert.throws(
    () =>
      new SelfManagedTls({
        kube: unusedKube(),
        secret: { namespace: "ns", name: "tls" },
        webhooks: {} as WebhookCaBundleClient,
        hosts: [],
        leader: { isLeader: () => false },
        rotation: { ...DEFAULT_TLS_ROTATION, caBundlePropagationMs: -1 },
        logger,
      }),
    { name: "TlsError", code: "invalid-rotation-settings", message: /^TLS rotation settings: caBundlePropagationMs must be a non-negative duration/ },
  );
});

test("serve refuses bad --tls-secret flags with exit code 2, one line each and where the help is", async () => {
  const writes: string[] = [];
  const original = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string) => (writes.push(String(chunk)), true)) as typeof process.stderr.write;
  try {
    assert.equal(await runServe(["--tls-secret", "no-namespace"]), 2);
    assert.equal(await runServe(["--tls-secret", "ns/tls", "--tls-cert", "a.pem", "--tls-key", "b.pem"]), 2);
  } finally {
    process.stderr.write = original;
  }
  assert.match(writes.join(""), /--tls-secret must be NAMESPACE\/NAME/);
  assert.match(writes.join(""), /--tls-secret and --tls-cert\/--tls-key are alternatives/);
  assert.match(writes.join(""), /see 'imprimatur serve --help'/);
});

test("defaults: webhook configuration and Lease named imprimatur, in the pod's namespace, held by the pod's name", () => {
  const kube = unusedKube();
  const logger = pino({ level: "silent" });
  const saved = { POD_NAME: process.env.POD_NAME, POD_NAMESPACE: process.env.POD_NAMESPACE };
  try {
    process.env.POD_NAME = "imprimatur-7d9f-abcde";
    process.env.POD_NAMESPACE = "imprimatur-system";
    const setup = selfManagedTlsSetup({ "tls-secret": "imprimatur-system/imprimatur-tls" }, kube, ["imprimatur.imprimatur-system.svc"], logger);
    assert.equal(setup.webhookConfiguration, "imprimatur");
    assert.deepEqual(setup.lease, { namespace: "imprimatur-system", name: "imprimatur", identity: "imprimatur-7d9f-abcde" });
    assert.deepEqual(setup.secret, { namespace: "imprimatur-system", name: "imprimatur-tls" });
    assert.equal(setup.rotation, undefined, "the default timeline");
    // Outside a pod the Lease sits beside the Secret; flags override everything.
    delete process.env.POD_NAMESPACE;
    assert.equal(selfManagedTlsSetup({ "tls-secret": "ns/tls" }, kube, [], logger).lease.namespace, "ns");
    const custom = selfManagedTlsSetup(
      {
        "tls-secret": "ns/tls",
        "webhook-configuration": "wh",
        "leader-election-namespace": "le",
        "leader-election-id": "lease",
        "tls-timeline": "propagation=1s",
        "tls-sync-interval": "250ms",
      },
      kube,
      [],
      logger,
    );
    assert.equal(custom.webhookConfiguration, "wh");
    assert.deepEqual([custom.lease.namespace, custom.lease.name], ["le", "lease"]);
    assert.equal(custom.rotation?.caBundlePropagationMs, 1000);
    assert.equal(custom.syncIntervalMs, 250);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test("the HTTPS server takes a new certificate for new connections without a restart", async () => {
  const ca = await createCertificateAuthority("test CA");
  const first = await issueCertificate(ca, { commonName: "first", ipAddresses: ["127.0.0.1"] });
  const second = await issueCertificate(ca, { commonName: "second", ipAddresses: ["127.0.0.1"], days: 3 });
  const listeners = new Set<(tls: { cert: string; key: string }) => void>();
  const stateDir = await mkdtemp(join(tmpdir(), "imprimatur-swap-"));
  const app = await startApp({
    policies: POLICIES,
    host: "127.0.0.1",
    port: 0,
    stateDir,
    tls: { cert: first.certPem, key: first.keyPem },
    tlsUpdates: {
      subscribe: (listener) => {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    },
    tlsHosts: [],
    config: DEFAULT_SERVER_CONFIG,
    logger: pino({ level: "silent" }),
    watchPolicies: false,
  });
  const served = () =>
    new Promise<string>((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port: app.port, ca: ca.certPem }, () => {
        const cn = new X509Certificate(socket.getPeerCertificate().raw).subject;
        socket.end();
        resolve(cn);
      });
      socket.on("error", reject);
    });
  try {
    assert.equal(await served(), "CN=first");
    assert.equal(listeners.size, 2, "the HTTPS server, and the serving certificate's expiry metric");
    for (const listener of listeners) listener({ cert: second.certPem, key: second.keyPem });
    assert.equal(await served(), "CN=second");
    const expiry = /^imprimatur_serving_certificate_expiration_timestamp_seconds (\d+)$/m.exec(await app.metrics.registry.metrics())?.[1];
    assert.equal(Number(expiry), Math.floor(new X509Certificate(second.certPem).validToDate.getTime() / 1000), "the metric follows the new certificate");
  } finally {
    await app.close();
    await rm(stateDir, { recursive: true, force: true });
  }
  assert.equal(listeners.size, 0, "a closed server stops listening for certificates");
});
