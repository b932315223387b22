// The CEL library loads with the first expression compiled, not with the process: `imprimatur check` on a policy
// without CEL never loads @bufbuild/cel, the same command on a policy with a matchCondition does and judges with it.
// The child process records every module it loads through a Node.js module hook.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { run, BIN } from "../../support/cli-process.ts";
import { recordModuleLoads } from "../../support/module-loads.ts";

const dir = mkdtempSync(join(tmpdir(), "imprimatur-cel-library-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const loads = recordModuleLoads(join(dir, "loaded.txt"));
const POD = join(dir, "pod.yaml");
writeFileSync(
  POD,
  `apiVersion: v1
kind: Pod
metadata: { name: web, namespace: shop, labels: { team: shop } }
spec: { containers: [{ name: web, image: registry.example.com/web:1 }] }
`,
);

/** Runs check on the policy; what it printed and whether @bufbuild/cel was loaded. */
async function check(policy: string): Promise<{ code: number | null; stdout: string; celLoaded: boolean }> {
  const file = join(dir, "policy.yaml");
  writeFileSync(file, policy);
  loads.reset();
  const r = await run(process.execPath, [...loads.nodeArgs, BIN, "check", "--policies", file, "-f", POD]);
  return { code: r.code, stdout: r.stdout + r.stderr, celLoaded: loads.loaded().includes("/@bufbuild/cel/") };
}

const policy = (matchConditions: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: registry }
spec:
${matchConditions}  rules: [{ action: deny, images: ["registry.example.com/*"], message: not this registry }]
  default: allow
`;

test("a policy set without CEL never loads the CEL library", async () => {
  const r = await check(policy(""));
  assert.equal(r.code, 1, r.stdout);
  assert.equal(r.celLoaded, false);
});

test("a matchCondition loads it when the policy compiles, and it decides", async () => {
  const matching = await check(policy("  matchConditions: [{ name: shop, expression: \"object.metadata.labels.team == 'shop'\" }]\n"));
  assert.equal(matching.code, 1, matching.stdout);
  assert.equal(matching.celLoaded, true);
  const other = await check(policy("  matchConditions: [{ name: bank, expression: \"object.metadata.labels.team == 'bank'\" }]\n"));
  assert.equal(other.code, 0, other.stdout);
  assert.equal(other.celLoaded, true);
});
