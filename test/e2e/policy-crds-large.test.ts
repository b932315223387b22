// A policy custom resource larger than status.inForce can hold, on a real kube-apiserver v1.20 with two
// `imprimatur serve --policy-crds` replicas: one running while the policy changes, one started after it broke.
// Every replica must enforce the same thing: a generation only a replica's memory holds (its record could not
// take the document) would stay in force on the old replica and vanish on the new one. So a policy whose
// document does not fit the record is never in force (Ready=False, TooLarge), and its last generation that
// fits stays in force on every replica, old and new.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { podReview } from "../support/admission.ts";
import { postJson } from "../support/https-client.ts";
import { teardown } from "../support/teardown.ts";
import { installPolicyCrds } from "../support/policy-crds.ts";

const NS = "team";
let cluster: KubeCluster;
let oldReplica: ImprimaturProcess | undefined;
let newReplica: ImprimaturProcess | undefined;

before(async () => {
  cluster = await startKubeCluster();
  await installPolicyCrds(cluster);
});

after(() => teardown([() => oldReplica?.stop(), () => newReplica?.stop(), () => cluster?.stop()]));

/** About 300 KB of deny rules for images nobody runs: past the 256 KiB the record holds. */
const padding = Array.from({ length: 2400 }, (_, i) => ({
  action: "deny",
  images: [`registry.example.com/padding/${String(i).padStart(5, "0")}-${"x".repeat(80)}`],
}));

const imagePolicy = (name: string, rules: unknown[]) =>
  JSON.stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name }, spec: { namespaces: [NS], rules, default: "allow" } });

/**
 * Created or replaced whole: `kubectl apply` would copy a document this large into the last-applied annotation,
 * which the API refuses past 256 KiB of annotations.
 */
async function put(document: string): Promise<void> {
  const name = (JSON.parse(document) as { metadata: { name: string } }).metadata.name;
  const exists = (await cluster.kubectl(["get", "imagepolicy", name])).code === 0;
  const res = await cluster.kubectl([exists ? "replace" : "create", "-f", "-"], { input: document });
  assert.equal(res.code, 0, res.stderr);
}

const allowed = async (replica: ImprimaturProcess, image: string): Promise<boolean> => {
  const res = await postJson(`${replica.baseUrl}/validate`, replica.ca, podReview({ images: [image], namespace: NS }));
  assert.equal(res.status, 200, res.text);
  return res.body.response.allowed as boolean;
};

interface Status {
  observedGeneration?: number;
  inForce?: { generation?: number; document?: string };
  conditions?: Array<{ type: string; status: string; reason: string; message: string; observedGeneration: number }>;
}

async function status(name: string): Promise<Status> {
  const res = await cluster.kubectl(["get", "imagepolicy", name, "-o", "json"]);
  assert.equal(res.code, 0, res.stderr);
  return (JSON.parse(res.stdout) as { status?: Status }).status ?? {};
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}\n${(await oldReplica?.log())?.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const judged = (name: string, generation: number) => async () =>
  (await status(name)).conditions?.find((c) => c.type === "Ready")?.observedGeneration === generation;

test("a policy larger than status.inForce holds: old and new replicas enforce the same generation after it becomes invalid", async () => {
  const probes = ["registry.example.com/big:1", "registry.example.com/big-two:1", "registry.example.com/huge:1"];
  // Generation 1 fits the record; the replica running throughout puts it in force.
  await put(imagePolicy("big", [{ action: "deny", images: ["registry.example.com/big"] }]));
  // Too large from its first generation, and valid.
  await put(imagePolicy("huge", [...padding, { action: "deny", images: ["registry.example.com/huge"] }]));
  oldReplica = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds"]);
  await until("generation 1 of big denies on the old replica", async () => !(await allowed(oldReplica!, probes[0]!)));
  await until("huge is judged", judged("huge", 1));

  // Generation 2: valid, and too large for the record.
  await put(
    imagePolicy("big", [{ action: "deny", images: ["registry.example.com/big"] }, ...padding, { action: "deny", images: ["registry.example.com/big-two"] }]),
  );
  await until("generation 2 is judged", judged("big", 2));
  // Generation 3: too large, and no longer compiles.
  await put(
    imagePolicy("big", [{ action: "deny", images: ["[registry.example.com/big"] }, ...padding, { action: "deny", images: ["registry.example.com/big-two"] }]),
  );
  await until("generation 3 is judged", judged("big", 3));

  // A replica started now, while the policy is broken, reads what the old one keeps from status.inForce.
  newReplica = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds"]);
  const answers = async (replica: ImprimaturProcess) => Promise.all(probes.map((image) => allowed(replica, image)));
  assert.deepEqual(await answers(newReplica), await answers(oldReplica), "both replicas enforce the same thing");
  assert.deepEqual(await answers(oldReplica), [false, true, true], "generation 1 of big is in force, and nothing of huge");

  const big = await status("big");
  assert.equal(big.inForce?.generation, 1);
  assert.equal(typeof big.inForce?.document, "string", "the generation in force is recorded whole");
  const ready = big.conditions?.find((c) => c.type === "Ready");
  assert.equal(ready?.reason, "TooLarge");
  assert.match(
    ready?.message ?? "",
    /^the policy document is \d+ bytes as JSON, more than the 262144 bytes status\.inForce can hold, .*\(generation 1 stays in force\)$/,
  );
  const huge = await status("huge");
  assert.equal(huge.inForce, undefined, "nothing of huge is in force, so nothing is recorded");
  assert.equal(huge.conditions?.find((c) => c.type === "Ready")?.reason, "TooLarge");
  assert.match(huge.conditions?.find((c) => c.type === "Ready")?.message ?? "", /\(this policy is not in force\)$/);
});
