// `imprimatur serve` loads the signature verification code (and the Sigstore, Notation, COSE and JOSE libraries it
// brings) only when a policy in force verifies: a server whose policies only name registries never loads it, one
// with a rule that has attestors loads it while it starts, not with its first admission. The child process records
// every module it loads through a Node.js module hook.
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { startImprimatur } from "../../support/imprimatur-process.ts";
import { tempFolder } from "../../support/temp-folders.ts";
import { recordModuleLoads } from "../../support/module-loads.ts";
import { generateSigningKey } from "../../support/signer/keys.ts";

const dir = await tempFolder("imprimatur-verifier-loading-");

const VERIFICATION = ["/src/verification/image-verifier.", "/node_modules/@sigstore/", "/node_modules/cbor2/", "/node_modules/jose/"];

/** Serves the policy until `during` returns; what the process had loaded by then (one module URL per line). */
async function serveAndRecord(name: string, policy: string, during: (loaded: () => string) => Promise<void>): Promise<string> {
  const folder = join(dir, name);
  const policies = join(folder, "policies");
  const loads = recordModuleLoads(join(dir, `${name}.loaded`));
  mkdirSync(policies, { recursive: true });
  writeFileSync(join(policies, "policy.yaml"), policy);
  const server = await startImprimatur(["--policies", policies], { nodeArgs: loads.nodeArgs });
  try {
    await during(loads.loaded);
  } finally {
    await server.stop();
  }
  return loads.loaded();
}

test("a server whose policies verify nothing never loads the verification code", async () => {
  const loaded = await serveAndRecord(
    "registries",
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: registries }
spec:
  rules: [{ action: allow, images: ["registry.example.com/*"] }]
  default: deny
`,
    // Serving, and a moment more: nothing loads it later either.
    () => new Promise((r) => setTimeout(r, 500)),
  );
  assert.match(loaded, /\/src\/engine\/engine\./, "the hook recorded the server's own modules");
  for (const part of VERIFICATION) assert.ok(!loaded.includes(part), `${part} was loaded`);
});

test("a rule with attestors loads it while the server starts, before any admission asks", async () => {
  const key = generateSigningKey("ecdsa-p256");
  await serveAndRecord(
    "signed",
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: signed }
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{ entries: [{ staticKey: { ignoreTlog: true, key: ${JSON.stringify(key.publicKeyPem)} } }] }]
  default: deny
`,
    async (loaded) => {
      // Loading starts as the policies come into force; it may finish a moment after /readyz answers.
      const deadline = Date.now() + 10_000;
      while (!loaded().includes("/src/verification/image-verifier.") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      for (const part of VERIFICATION.slice(0, 2)) assert.ok(loaded().includes(part), `${part} was not loaded`);
    },
  );
});
