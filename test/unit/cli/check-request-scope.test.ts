// `check` decides match/exclude as the cluster would: as the user given with --as/--as-group (with the groups
// kube-apiserver's impersonation adds), on the resource the kind is served as, and with only the policies the
// object is judged by (an out-of-scope rule with attestors leaves nothing "unverified").
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { impersonatedUser } from "../../../src/cli/impersonation.ts";
import { imprimatur } from "../../support/cli-process.ts";

let dir: string;

const POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: developers-use-internal}
spec:
  matchConstraints:
    subjects: [{kind: Group, name: developers}, {kind: ServiceAccount, namespace: ci, name: "*"}]
  rules: [{action: allow, images: ["registry.example.com/*"]}]
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed-deployments}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}]
  rules:
    - action: allow
      images: ["*"]
      verifyDigest: false
      attestors: [{entries: [{staticKey: {keyRef: "cosign.pub"}}]}]
`;

const POD = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {containers: [{name: web, image: "docker.io/library/nginx:1.27"}]}
`;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-check-scope-"));
  await writeFile(join(dir, "policies.yaml"), POLICIES);
  // Any P-256 public key: no signature is checked offline.
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  await writeFile(join(dir, "cosign.pub"), publicKey.export({ type: "spki", format: "pem" }));
  await writeFile(join(dir, "pod.yaml"), POD);
});

after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const check = (...args: string[]) => imprimatur(["check", "--policies", join(dir, "policies.yaml"), "-f", join(dir, "pod.yaml"), "-o", "json", ...args]);

test("--as and --as-group pick the policies whose subjects name the user; none given, no subject matches", async () => {
  const anonymous = await check();
  assert.equal(anonymous.code, 0, anonymous.stderr);
  const developer = await check("--as", "alice", "--as-group", "developers");
  assert.equal(developer.code, 1, developer.stdout);
  assert.match(developer.stdout, /developers-use-internal/);
  assert.equal((await check("--as", "bob", "--as-group", "ops")).code, 0);
  // A service account gets its groups and is matched by namespace.
  assert.equal((await check("--as", "system:serviceaccount:ci:builder")).code, 1);
  assert.equal((await check("--as", "system:serviceaccount:default:builder")).code, 0);
});

test("--as-group without --as is a usage error, as for kubectl", async () => {
  const r = await check("--as-group", "developers");
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--as-group needs --as/);
});

test("a rule with attestors in a policy the object is not for leaves nothing unverified", async () => {
  const r = await check();
  assert.equal(r.code, 0, r.stdout);
  assert.equal((JSON.parse(r.stdout) as { results: Array<{ result: string }> }).results[0]!.result, "allowed");
});

test("the groups kube-apiserver's impersonation adds", () => {
  assert.deepEqual(impersonatedUser("alice", []), { username: "alice", groups: ["system:authenticated"] });
  assert.deepEqual(impersonatedUser("alice", ["developers"]), { username: "alice", groups: ["developers", "system:authenticated"] });
  assert.deepEqual(impersonatedUser("alice", ["system:unauthenticated"]), { username: "alice", groups: ["system:unauthenticated"] });
  assert.deepEqual(impersonatedUser("system:serviceaccount:ci:builder", []), {
    username: "system:serviceaccount:ci:builder",
    groups: ["system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"],
  });
  assert.deepEqual(impersonatedUser("system:serviceaccount:ci:builder", ["g"]), {
    username: "system:serviceaccount:ci:builder",
    groups: ["g", "system:authenticated"],
  });
  assert.deepEqual(impersonatedUser("system:anonymous", []), { username: "system:anonymous", groups: ["system:unauthenticated"] });
});

test("imprimatur test: a PolicyTest's userInfo, else --as/--as-group, is who creates the resources", async () => {
  const shipped = await imprimatur(["test", "policy-tests/examples/request-scope/", "-o", "json"]);
  assert.equal(shipped.code, 0, shipped.stdout + shipped.stderr);
  const testFile = join(dir, "imprimatur-test.yaml");
  await writeFile(
    testFile,
    `apiVersion: imprimatur.dev/v1alpha1
kind: PolicyTest
metadata: {name: as-flag}
policies: [policies.yaml]
resources: [pod.yaml]
results: [{resource: Pod/web, result: denied, policy: developers-use-internal, rule: default}]
`,
  );
  assert.equal((await imprimatur(["test", testFile, "--as", "alice", "--as-group", "developers"])).code, 0);
  const anonymous = await imprimatur(["test", testFile]);
  assert.equal(anonymous.code, 1, "without a user, the policy whose subjects name developers does not apply");
  const badUser = await imprimatur(["test", testFile, "--as-group", "developers"]);
  assert.equal(badUser.code, 2);
});
