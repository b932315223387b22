// The policy kinds' CustomResourceDefinitions (deploy/crds, as `kubectl apply -k` installs them) on a test
// cluster, established before the test goes on.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import type { KubeCluster } from "./kube-cluster.ts";

const CRDS = fileURLToPath(new URL("../../deploy/crds", import.meta.url));

export async function installPolicyCrds(cluster: KubeCluster): Promise<void> {
  const installed = await cluster.kubectl(["apply", "-k", CRDS]);
  assert.equal(installed.code, 0, installed.stderr);
  const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
}
