// A TrustRoot's `path:` names a trusted_root.json beside it in the policy folder (docs/signatures.md). Every .json
// of that folder is read as a policy file, so the loader must know the files policies name: they are data, not
// policies, and do not stop the folder from loading. A named file that holds a policy stays one.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { loadPolicies } from "../../src/policy/load-policies.ts";
import { PolicyLoadError } from "../../src/policy/policy-error.ts";
import { createMockSigstore } from "../support/signer/mock-sigstore.ts";

let dir: string;
let trustedRoot: unknown;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-trust-root-files-"));
  trustedRoot = (await createMockSigstore({ name: "corp" })).trustedRoot;
});
after(() => rm(dir, { recursive: true, force: true }));

const trustRoot = (name: string, path: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: TrustRoot
metadata: { name: ${name} }
spec:
  path: ${path}
`;

const imagePolicy = (name: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: ${name} }
spec:
  rules:
    - images: ["registry.example.com/*"]
      action: allow
`;

test("the docs' example: a TrustRoot with path: corp-trusted-root.json beside it loads with the folder's other policies", async () => {
  const folder = join(dir, "docs-example");
  await mkdir(folder);
  await writeFile(join(folder, "corp-trust-root.yaml"), trustRoot("corp-sigstore", "corp-trusted-root.json"));
  await writeFile(join(folder, "corp-trusted-root.json"), JSON.stringify(trustedRoot, null, 2));
  await writeFile(join(folder, "apps.yaml"), imagePolicy("apps"));
  const loaded = await loadPolicies(folder);
  assert.deepEqual(
    loaded.policies.TrustRoot.map((t) => t.name),
    ["corp-sigstore"],
  );
  assert.deepEqual(
    loaded.policies.ImagePolicy.map((p) => p.name),
    ["apps"],
  );
  assert.deepEqual(loaded.origins, [join(folder, "apps.yaml"), join(folder, "corp-trust-root.yaml")], "the root is not a policy file");
});

test("a .json that no policy names is still read as a policy, and one that is no policy is still an error", async () => {
  const folder = join(dir, "unnamed");
  await mkdir(folder);
  await writeFile(join(folder, "stray-trusted-root.json"), JSON.stringify(trustedRoot));
  await assert.rejects(loadPolicies(folder), (e: unknown) => {
    assert.ok(e instanceof PolicyLoadError);
    assert.match(e.message, /stray-trusted-root\.json/);
    return true;
  });
});

test("a named file that holds a policy stays a policy; the TrustRoot that names it gets the error", async () => {
  const folder = join(dir, "names-a-policy");
  await mkdir(folder);
  await writeFile(join(folder, "root.yaml"), trustRoot("wrong", "apps.json"));
  await writeFile(
    join(folder, "apps.json"),
    JSON.stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "apps" },
      spec: { rules: [{ images: ["*"], action: "allow" }] },
    }),
  );
  await assert.rejects(loadPolicies(folder), (e: unknown) => {
    assert.ok(e instanceof PolicyLoadError);
    assert.match(e.message, /root\.yaml.*spec\.path/s);
    assert.doesNotMatch(e.message, /apps\.json/, "the policy in apps.json loads as a policy");
    return true;
  });
});
