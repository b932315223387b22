// A CallerTokens file whose callers speak for a cluster serve cannot read (neither --cluster-name nor a
// --cluster-kubeconfig) is said at start and at each reread, so that a misspelt `cluster` is not first met as a
// refused pod: the pure check, and a real `imprimatur serve` process.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { stringify } from "yaml";
import { tokenDigest } from "../../../src/caller-auth/caller-tokens.ts";
import { unreadableCallerClusters } from "../../../src/server/cluster-flags.ts";
import { randomToken } from "../../support/caller-credentials.ts";
import { startImprimatur } from "../../support/imprimatur-process.ts";

test("the clusters of token callers that serve cannot read: neither its own nor another it has a kubeconfig for", () => {
  const callers = [{ cluster: "prod" }, { cluster: "staging" }, { cluster: "prdo" }, { cluster: "prdo" }];
  assert.deepEqual(unreadableCallerClusters(callers, "prod", new Map([["staging", "staging.kubeconfig"]])), ["prdo"]);
  assert.deepEqual(unreadableCallerClusters(callers, undefined, new Map()), ["prdo", "prod", "staging"]);
  assert.deepEqual(unreadableCallerClusters([], "prod", new Map()), []);
});

test("serve says so at start; a fixed file is not warned about, and a misspelt one again is", { timeout: 60_000 }, async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-caller-cluster-"));
  const file = join(dir, "callers.yaml");
  const callers = (cluster: string) =>
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "CallerTokens",
      callers: [{ name: "kube-apiserver", cluster, tokenSha256: tokenDigest(randomToken()) }],
    });
  await writeFile(file, callers("my-clustr"));
  const server = await startImprimatur(["--caller-tokens", file, "--cluster-name", "my-cluster"]);
  try {
    const warning = /caller tokens: these callers' clusters are neither --cluster-name nor a --cluster-kubeconfig/;
    const log = await server.log();
    assert.match(log, warning);
    assert.match(log, /"clusters":\["my-clustr"\]/);
    assert.match(log, /"clusterName":"my-cluster"/);
    // Fixed: reread within seconds, and nothing more is said.
    const before = (await server.log()).match(new RegExp(warning, "g"))?.length ?? 0;
    await writeFile(file, callers("my-cluster"));
    await new Promise((r) => setTimeout(r, 6_000));
    assert.equal((await server.log()).match(new RegExp(warning, "g"))?.length ?? 0, before);
    // Misspelt again: said again.
    await writeFile(file, callers("my-clustr"));
    for (let i = 0; ((await server.log()).match(new RegExp(warning, "g"))?.length ?? 0) === before; i++) {
      assert.ok(i < 100, "the reread file is checked again");
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
});
