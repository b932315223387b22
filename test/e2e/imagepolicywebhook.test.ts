// kube-apiserver's in-tree ImagePolicyWebhook admission plugin → `imprimatur serve` (/imagereview),
// driven with kubectl against a real etcd + kube-apiserver v1.20.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { podYaml } from "../support/manifests.ts";
import { renderAdmissionConfiguration } from "../../src/server/webhook-manifests.ts";
import { teardown } from "../support/teardown.ts";

const POLICIES = fileURLToPath(new URL("../fixtures/e2e-policies/", import.meta.url));
let imprimatur: ImprimaturProcess;
let cluster: KubeCluster;

before(async () => {
  // An ImageReview names no user, so no one can be asked whether the user may break glass: over /imagereview an
  // override is honoured only on the annotations alone, which the server must be told (else it refuses them all,
  // test/unit/image-review.test.ts).
  const configDir = await mkdtemp(join(tmpdir(), "imprimatur-ipw-"));
  const config = join(configDir, "config.yaml");
  await writeFile(config, "apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\nbreakGlass:\n  authorization: None\n");
  imprimatur = await startImprimatur(["--policies", POLICIES, "--config", config]);
  // `serve` wrote the kubeconfig the ImagePolicyWebhook needs (server URL + our CA) into its state folder.
  const admissionConfigYaml = renderAdmissionConfiguration({
    kubeconfigPath: join(imprimatur.stateDir, "imagepolicy-kubeconfig.yaml"),
    allowTTLSeconds: 1,
    denyTTLSeconds: 1,
    defaultAllow: false,
  });
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ImagePolicyWebhook"], admissionConfigYaml });
  for (const ns of ["e2e-ipw", "e2e-locked"]) assert.equal((await cluster.kubectl(["create", "namespace", ns])).code, 0);
});

after(() => teardown([() => cluster?.stop(), () => imprimatur?.stop()]));

test("an allowed image creates the pod", async () => {
  const res = await cluster.apply(podYaml("good", "e2e-ipw", ["registry.example.com/app:1.0"]));
  assert.equal(res.code, 0, res.stderr);
  const got = await cluster.kubectl(["get", "pod", "good", "-n", "e2e-ipw", "-o", "jsonpath={.spec.containers[0].image}"]);
  assert.equal(got.stdout, "registry.example.com/app:1.0");
});

test("a denied image is forbidden with our reason", async () => {
  const res = await cluster.apply(podYaml("bad", "e2e-ipw", ["registry.example.com/app:1.0", "docker.io/library/nginx:1.25"]));
  assert.notEqual(res.code, 0);
  assert.match(
    res.stderr,
    /pods "bad" is forbidden: image policy webhook backend denied one or more images: image "docker\.io\/library\/nginx:1\.25" denied by policy trusted-registries default: only images from registry\.example\.com may run/,
  );
  const latest = await cluster.apply(podYaml("latest", "e2e-ipw", ["registry.example.com/app"]));
  assert.match(latest.stderr, /denied by policy trusted-registries rules\[0\]: pin a version/);
});

test("break-glass annotations reach the backend and override where allowed, audited", async () => {
  const annotations = { "break-glass.image-policy.k8s.io/reason": "hotfix", "break-glass.image-policy.k8s.io/ticket": "INC-1001" };
  const ok = await cluster.apply(podYaml("glass", "e2e-ipw", ["docker.io/library/nginx:1.25"], annotations));
  assert.equal(ok.code, 0, ok.stderr);
  const audit = (await readFile(join(imprimatur.stateDir, "audit.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const record = audit.find((r) => r.ticket === "INC-1001");
  assert.ok(record, "audit record written");
  assert.equal(record.event, "break-glass");
  assert.equal(record.namespace, "e2e-ipw");
  assert.deepEqual(record.images, ["docker.io/library/nginx:1.25"]);

  const refused = await cluster.apply(podYaml("glass", "e2e-locked", ["docker.io/library/nginx:1.25"], annotations));
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /policy locked-down breakGlass: break-glass was requested but this policy does not allow overrides in namespace "e2e-locked"/);

  const noTicket = await cluster.apply(podYaml("glass2", "e2e-ipw", ["docker.io/library/nginx:1.25"], { "break-glass.image-policy.k8s.io/reason": "hotfix" }));
  assert.notEqual(noTicket.code, 0);
  assert.match(noTicket.stderr, /missing: break-glass\.image-policy\.k8s\.io\/ticket/);
});
