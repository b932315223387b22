// A running server picks up policy changes, and keeps the last good set when a change does not load.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PolicyLoadError } from "../../src/policy/policy-error.ts";
import { postJson } from "../support/https-client.ts";
import { startTestApp } from "../support/in-process-app.ts";
import { imageReview } from "../support/admission.ts";

const policy = (action: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: only}
spec:
  rules: [{action: ${action}, images: ["nginx"]}]
  default: allow
`;

test("reload applies a good change and keeps the last good set on a bad one", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-reload-"));
  const policies = join(dir, "policies");
  await mkdir(policies);
  await writeFile(join(policies, "p.yaml"), policy("allow"));
  const { app, ca, close } = await startTestApp({ policies, stateDir: join(dir, "state") });
  try {
    const ask = async () => (await postJson(`https://127.0.0.1:${app.port}/imagereview`, ca, imageReview(["nginx:1.25"]))).body.status.allowed;
    assert.equal(await ask(), true);

    await writeFile(join(policies, "p.yaml"), policy("deny"));
    assert.equal(await app.reload(), undefined);
    assert.equal(await ask(), false, "the new policy is in force");

    await writeFile(join(policies, "p.yaml"), policy("perhaps"));
    const err = await app.reload();
    assert.ok(err instanceof PolicyLoadError);
    assert.match(err.message, /p\.yaml:5 \(document 1, spec\.rules\[0\]\.action\)/);
    assert.equal(await ask(), false, "the last good policy is still in force");
    assert.equal(app.policies()[0]?.rules[0]?.action, "deny");
  } finally {
    await close();
    await rm(dir, { recursive: true, force: true });
  }
});
