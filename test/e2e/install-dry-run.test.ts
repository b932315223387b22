// `imprimatur install --dry-run` and the command's usage errors, with the real kubectl (its kustomize renders) and
// no cluster: what would be applied is printed, in the order install applies it, with the image by the digest of the
// build, the webhooks as configured; nothing is pushed. The steps on a real cluster are in install.test.ts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import { imprimatur } from "../support/cli-process.ts";
import { kubeToolPaths } from "../support/kube-cluster.ts";

const KUBECTL = () => kubeToolPaths().kubectl;
// A kubeconfig that names no reachable server: a dry run needs none.
const OFFLINE = { ...process.env, KUBECONFIG: "/nonexistent/kubeconfig" };

test("--dry-run -o yaml prints the CRDs, the default policy, the workload with the built image by digest, then the webhooks at Fail", async () => {
  const r = await imprimatur(["install", "--registry", "registry.example.com/platform/imprimatur", "--dry-run", "-o", "yaml", "--kubectl", KUBECTL()], {
    env: OFFLINE,
  });
  assert.equal(r.code, 0, r.stderr);
  const built = /^image +built imprimatur \S+ \(revision [^)]+\): (sha256:[0-9a-f]{64})$/m.exec(r.stderr)?.[1];
  assert.ok(built, `the build's line goes to standard error with -o yaml: ${r.stderr}`);
  assert.match(r.stderr, /^cluster +not reachable .*: rendering the install for v1\.21 and later$/m);
  assert.doesNotMatch(r.stderr, /pushed/);
  const objects = parseAllDocuments(r.stdout).map((d) => d.toJS() as { kind: string; metadata: { name: string }; [k: string]: unknown });
  const kinds = objects.map((o) => o.kind);
  const lastCrd = kinds.lastIndexOf("CustomResourceDefinition");
  assert.ok(lastCrd > 0 && kinds.slice(0, lastCrd + 1).every((k) => k === "CustomResourceDefinition"), `CRDs first: ${kinds.join(", ")}`);
  assert.equal(kinds[lastCrd + 1], "ImagePolicy", "then the default policy");
  assert.deepEqual(kinds.slice(-2).sort(), ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"], "the webhooks last");
  const deployment = objects.find((o) => o.kind === "Deployment") as unknown as { spec: { template: { spec: { containers: Array<{ image: string }> } } } };
  assert.equal(deployment.spec.template.spec.containers[0]!.image, `registry.example.com/platform/imprimatur@${built}`);
  for (const o of objects.slice(-2)) {
    for (const w of o.webhooks as Array<{ failurePolicy: string }>) assert.equal(w.failurePolicy, "Fail", "as configured: the end state");
  }
});

test("--dry-run -n moves every namespaced object; --no-default-policies leaves the policy out", async () => {
  const r = await imprimatur(
    ["install", "--registry", "registry.example.com/imprimatur", "--dry-run", "-o", "json", "-n", "security", "--no-default-policies", "--kubectl", KUBECTL()],
    { env: OFFLINE },
  );
  assert.equal(r.code, 0, r.stderr);
  const list = JSON.parse(r.stdout) as { items: Array<{ kind: string; metadata: { name: string; namespace?: string } }> };
  assert.ok(!list.items.some((o) => o.kind === "ImagePolicy"));
  assert.ok(list.items.some((o) => o.kind === "Namespace" && o.metadata.name === "security"));
  assert.deepEqual(
    list.items.filter((o) => o.metadata.namespace !== undefined && o.metadata.namespace !== "security"),
    [],
  );
});

test("usage errors exit 2 with one line naming the problem", async () => {
  const cases: Array<[string[], RegExp]> = [
    [["install"], /give the repository to push the image to with --registry/],
    [["install", "--registry", "registry.example.com/imprimatur:1.0"], /without a tag or digest/],
    [["install", "--registry", "Not A Reference"], /--registry Not A Reference: /],
    [["install", "--registry", "registry.example.com/imprimatur", "-o", "yaml"], /-o yaml prints the objects of a --dry-run/],
    [["install", "--registry", "registry.example.com/imprimatur", "--timeout", "soon"], /--timeout must be a whole number of seconds/],
    [["uninstall", "--bogus"], /Unknown option '--bogus'/],
  ];
  for (const [args, message] of cases) {
    const r = await imprimatur(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.match(r.stderr, new RegExp(`see 'imprimatur ${args[0]} --help'`));
  }
});

test("kubectl that cannot be run is a failed step with what to do, exit 1", async () => {
  const r = await imprimatur(["uninstall", "--kubectl", "/nonexistent/kubectl"]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^imprimatur uninstall: cannot run \/nonexistent\/kubectl: not found; install kubectl or name it with --kubectl\n$/);
});
