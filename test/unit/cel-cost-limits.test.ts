// kube-apiserver's CEL limits, through the paths a user takes: a policy whose estimated cost passes the limit is
// refused when `check` or `serve` loads it (issue 33: four nested all() loops over 100 containers took minutes
// per review), and an expression that passes the estimate but costs too much on a large request is ended with
// the failure policy's answer and the reason (POST /validate).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { PolicyLoadError } from "../../src/policy/policy-error.ts";
import { podReview } from "../support/admission.ts";
import { imprimatur } from "../support/cli-process.ts";
import { postJson } from "../support/https-client.ts";
import { startTestApp } from "../support/in-process-app.ts";

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function folderWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-cel-limits-"));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

// True for every four containers: each loop runs to its end, 100^4 times the innermost body.
const NESTED =
  "object.spec.containers.all(a, object.spec.containers.all(b, object.spec.containers.all(c, object.spec.containers.all(d, a.name + b.name + c.name + d.name != ''))))";

const NESTED_POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: stalls}
spec:
  matchConditions:
    - name: nested
      expression: "${NESTED}"
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
`;

const images = (n: number) => Array.from({ length: n }, () => "registry.example.com/app:1");

const pod = (n: number) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "wide", namespace: "default" },
  spec: { containers: images(n).map((image, i) => ({ name: `c${i}`, image })) },
});

const REFUSED = new RegExp(
  String.raw`p\.yaml:7 \(document 1, spec\.matchConditions\[0\]\.expression\): CEL ".*": estimated cost \d\.\de\+\d+ exceeds budget by factor of more than 100x: at most 10000000 is allowed`,
);

test(
  "check refuses the issue's four nested loops over 100 containers when it loads the policy, with the estimate and the limit",
  { timeout: 10_000 },
  async () => {
    const policies = await folderWith({ "p.yaml": NESTED_POLICY });
    const manifests = await folderWith({ "pod.json": JSON.stringify(pod(100)) });
    const r = await imprimatur(["check", "--policies", policies, "-f", manifests]);
    assert.equal(r.code, 2, r.stdout);
    assert.match(r.stderr, REFUSED);
  },
);

test("serve refuses to start on it, with the same reason", { timeout: 10_000 }, async () => {
  const policies = await folderWith({ "p.yaml": NESTED_POLICY });
  const started = await startTestApp({ policies }).catch((e: unknown) => e);
  // A server that starts is stopped, so that the test fails rather than hangs.
  if (!(started instanceof Error)) await (started as { close(): Promise<void> }).close();
  assert.ok(started instanceof PolicyLoadError, "serve started");
  assert.match(started.message, REFUSED);
});

// Passes the estimate (about 9.4 million for a million containers); evaluating it costs 11 per container.
const COSTLY_POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: internal-pods}
spec:
  matchConditions:
    - name: all-internal
      expression: "object.spec.containers.all(c, c.image.startsWith('registry.example.com/') && c.name != '')"
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
`;

/** The answer of /validate to the creation of a pod with these images, under one policy. */
async function validate(failOpen: boolean, images: string[], policy = COSTLY_POLICY) {
  const app = await startTestApp({ policies: await folderWith({ "p.yaml": policy }), config: { ...DEFAULT_SERVER_CONFIG, failOpen } });
  try {
    const r = await postJson(`${app.base}/validate`, app.ca, podReview({ images }));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return (r.body as { response: { allowed: boolean; status?: { message: string } } }).response;
  } finally {
    await app.close();
  }
}

const LIMIT_REASON = /matchCondition "all-internal" failed: CEL ".*": operation cancelled: actual cost limit exceeded: one evaluation may cost at most 1000000/;

test(
  "a condition that passes the estimate but costs more than a million units on a large pod is ended: failing closed, denied with the reason",
  { timeout: 10_000 },
  async () => {
    // Small: the condition holds, and the policy admits the pod.
    assert.equal((await validate(false, images(3))).allowed, true);
    // 100 000 containers (about 4 MB, under the 8 MiB request limit): 1.1 million units.
    const r = await validate(false, images(100_000));
    assert.equal(r.allowed, false);
    assert.match(r.status?.message ?? "", /internal-pods/);
    assert.match(r.status?.message ?? "", LIMIT_REASON);
  },
);

test("failing open, the policy whose condition ran out of cost is left out", { timeout: 10_000 }, async () => {
  // The last container would make the condition false (out of scope), but the evaluation ends before it: failing
  // open the policy is left out and does not deny the other registry's image; failing closed the pod is denied.
  const mixed = [...images(99_999), "docker.io/library/nginx:1"];
  assert.equal((await validate(true, mixed)).allowed, true);
  const closed = await validate(false, mixed);
  assert.equal(closed.allowed, false);
  assert.match(closed.status?.message ?? "", LIMIT_REASON);
});

test("the matchConditions of one policy share 2.5 million units on a request: the one that runs out fails with the reason", { timeout: 10_000 }, async () => {
  // Each condition costs about 800 000 on 100 000 containers, under the million one evaluation may cost: three
  // spend 2.4 million, the fourth runs out.
  const expression = "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))";
  const policy = COSTLY_POLICY.replace(
    / {4}- name: all-internal\n.*\n/,
    ["a", "b", "c", "d"].map((n) => `    - {name: ${n}, expression: "${expression}"}\n`).join(""),
  );
  assert.match(policy, /name: d/);
  const r = await validate(false, images(100_000), policy);
  assert.equal(r.allowed, false);
  assert.match(
    r.status?.message ?? "",
    /matchCondition "d" failed: CEL ".*": running out of cost budget: the matchConditions of one policy may cost at most 2500000 per request/,
  );
});
