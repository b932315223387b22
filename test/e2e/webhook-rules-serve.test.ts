// The webhook configurations `serve` writes leave out resources no policy's matchConstraints reach, but never
// what something else still needs: a remote backend reviews every pod; a server with no policy yet (an empty
// folder, or --policy-crds) must be asked once policies arrive; and a reload that needs other rules rewrites the
// files and says to apply them again. The mutating webhook is written only when a rule pins or verifies images;
// every configuration leaves kube-system out and says what its failure policy means. Real serve processes; the
// apiserver side is test/e2e/request-match.test.ts.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { parse as parseYaml } from "yaml";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startConfiguredTestBackend, type TestBackend } from "../support/test-imagereview-backend.ts";
import { teardown } from "../support/teardown.ts";

const KIND_BOUND = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: only-deployments}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: ["*"], resources: [deployments], operations: ["*"]}]
  rules: [{action: allow, images: ["registry.example.com/*"]}]
`;
const FOR_PODS = `
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pods-from-internal}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}]
  rules: [{action: allow, images: ["registry.example.com/*"], digestMutate: true}]
`;
const EVERY_RESOURCE = [
  "pods",
  "pods/ephemeralcontainers",
  "replicationcontrollers",
  "podtemplates",
  "deployments",
  "replicasets",
  "statefulsets",
  "daemonsets",
  "jobs",
  "cronjobs",
];

let dir: string;
let backend: TestBackend;
const servers: ImprimaturProcess[] = [];

async function serve(args: string[]): Promise<ImprimaturProcess> {
  const server = await startImprimatur(args);
  servers.push(server);
  // serve answers /readyz first and writes its webhook configurations right after: wait for them.
  for (let i = 0; i < 200 && !existsSync(join(server.stateDir, "admission-configuration.yaml")); i++) await sleep(50);
  return server;
}

async function resourcesOf(server: ImprimaturProcess, file = "validating-webhook.yaml"): Promise<string[]> {
  const config = parseYaml(await readFile(join(server.stateDir, file), "utf8")) as { webhooks: Array<{ rules: Array<{ resources: string[] }> }> };
  return config.webhooks[0]!.rules.flatMap((r) => r.resources);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-webhook-rules-"));
  ({ backend } = await startConfiguredTestBackend(dir, { token: "token" }));
  for (const folder of ["kind-bound", "with-backend", "reloaded"]) {
    await mkdir(join(dir, folder));
    await writeFile(join(dir, folder, "policies.yaml"), KIND_BOUND);
  }
  await mkdir(join(dir, "empty"));
});

after(() => teardown([...servers.map((s) => () => s.stop()), () => backend?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

test("only kind-bound policies: the configurations name only their resources; with no rule that pins or verifies, no mutating webhook", async () => {
  const server = await serve(["--policies", join(dir, "kind-bound")]);
  assert.deepEqual(await resourcesOf(server), ["deployments"]);
  assert.equal(existsSync(join(server.stateDir, "mutating-webhook.yaml")), false);
  assert.match(await server.log(), /No policy pins or verifies images: no mutating webhook is needed \(none written\)/);
});

test("the written configurations leave kube-system out by its kubernetes.io/metadata.name label and say what Fail means", async () => {
  const server = await serve(["--policies", join(dir, "kind-bound")]);
  const text = await readFile(join(server.stateDir, "validating-webhook.yaml"), "utf8");
  const config = parseYaml(text) as { webhooks: Array<{ failurePolicy: string; namespaceSelector?: unknown }> };
  assert.deepEqual(config.webhooks[0]!.namespaceSelector, {
    matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] }],
  });
  assert.equal(config.webhooks[0]!.failurePolicy, "Fail");
  assert.match(text, /^# failurePolicy: Fail: while the apiserver cannot get an answer from this server/);
  assert.match(text, /kubectl delete validatingwebhookconfiguration imprimatur/);
  assert.match(text, /Kubernetes before 1\.21 does not set the kubernetes\.io\/metadata\.name label/);
});

test("a remote backend reviews every pod: every resource stays in the configurations", async () => {
  const server = await serve(["--policies", join(dir, "with-backend"), "--config", join(dir, "config.yaml")]);
  assert.deepEqual(await resourcesOf(server), EVERY_RESOURCE);
});

test("a server started with no policy keeps every resource, so policies that arrive later are asked about", async () => {
  const server = await serve(["--policies", join(dir, "empty"), "--allow-empty"]);
  assert.deepEqual(await resourcesOf(server), EVERY_RESOURCE);
});

test("a reload that needs other rules rewrites the configurations and says to apply them again; a rule that pins brings the mutating webhook", async () => {
  const server = await serve(["--policies", join(dir, "reloaded")]);
  assert.deepEqual(await resourcesOf(server), ["deployments"]);
  assert.equal(existsSync(join(server.stateDir, "mutating-webhook.yaml")), false);
  await writeFile(join(dir, "reloaded", "policies.yaml"), KIND_BOUND + FOR_PODS);
  // The watcher may also see the file half written (a reload of fewer policies); wait for the last reload's files.
  const settled = async () => JSON.stringify(await resourcesOf(server)) === JSON.stringify(["pods", "deployments"]);
  for (let i = 0; i < 200 && !(await settled()); i++) await sleep(100);
  assert.deepEqual(await resourcesOf(server), ["pods", "deployments"]);
  assert.match(await server.log(), /the reloaded policies need other webhook rules: apply the rewritten configuration again/);
  assert.deepEqual(await resourcesOf(server, "mutating-webhook.yaml"), ["pods", "deployments"]);
});
