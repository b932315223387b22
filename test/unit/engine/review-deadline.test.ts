// A review's whole evaluation ends at its deadline (the request's ?timeout=, less the time kept to answer), and
// past it the failure policy answers with the reason: per-policy CEL budgets bound one policy, but a namespace
// may hold many. Through a real `imprimatur serve` process: one namespace's twenty policies, each within its
// limits, would hold Node's one thread for about half a minute on a large pod; the review is cut at its deadline,
// and fifty concurrent reviews of other namespaces, sent while it runs, are all answered, each within the 10 s
// an apiserver would wait for it.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { podReview } from "../../support/admission.ts";
import { startImprimatur, type ImprimaturProcess } from "../../support/imprimatur-process.ts";
import { NO_DOCKER_HUB } from "../../support/tenant-policies.ts";
import { teardown } from "../../support/teardown.ts";

const SLOW_POLICIES = 20;
/** One loop per expression, over a list as long as the request makes it: accepted at load, costly at run time. */
const LOOP = "object.spec.containers[0].env.all(e, e.name != '')";

/** Twenty NamespacedImagePolicies in `slow`, each with three such matchConditions (what one policy may spend). */
function slowPolicies(): string {
  return Array.from(
    { length: SLOW_POLICIES },
    (_, i) => `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: slow-${i}, namespace: slow}
spec:
  matchConditions:
    - {name: first, expression: "${LOOP}"}
    - {name: second, expression: "${LOOP}"}
    - {name: third, expression: "${LOOP}"}
  rules:
    - {action: allow, images: ["registry.example.com/*"]}
`,
  ).join("---\n");
}

let dir: string;
let server: ImprimaturProcess;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-review-deadline-"));
  await writeFile(join(dir, "policies.yaml"), `${NO_DOCKER_HUB}---\n${slowPolicies()}`);
  server = await startImprimatur(["--policies", join(dir, "policies.yaml")]);
});

after(() => teardown([() => server?.stop(), () => rm(dir, { recursive: true, force: true })]));

/** POST /validate?timeout=…, as kube-apiserver calls it, giving up after `clientTimeoutMs` as it would. */
function validate(body: unknown, timeoutSeconds: number, clientTimeoutMs: number): Promise<{ allowed: boolean; message: string }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${server.baseUrl}/validate?timeout=${timeoutSeconds}s`,
      { method: "POST", ca: server.ca, agent: false, headers: { "content-type": "application/json" }, timeout: clientTimeoutMs },
      (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => {
          const response = (JSON.parse(text) as { response: { allowed: boolean; status?: { message?: string } } }).response;
          resolve({ allowed: response.allowed, message: response.status?.message ?? "" });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within ${clientTimeoutMs} ms`)));
    req.on("error", reject);
    req.end(data);
  });
}

/** A pod in `slow` whose first container has 250,000 environment variables: each loop runs to its cost limit. */
function largeSlowPod() {
  const review = podReview({ images: ["registry.example.com/app:1"], namespace: "slow" });
  const container = review.request.object.spec.containers[0] as Record<string, unknown>;
  container.env = Array.from({ length: 250_000 }, () => ({ name: "v" }));
  return review;
}

test(
  "a namespace whose policies would stall the server: its review ends at the deadline, fifty others are answered meanwhile",
  { timeout: 120_000 },
  async () => {
    const slow = validate(largeSlowPod(), 5, 60_000);
    // The large review first, so that its evaluation holds the thread when the others arrive.
    await new Promise((r) => setTimeout(r, 300));
    const others = Array.from({ length: 50 }, (_, i) => {
      const image = i % 2 === 0 ? "registry.example.com/app:1" : "docker.io/library/nginx:1.25";
      return validate(podReview({ images: [image], namespace: i % 5 === 0 ? "kube-system" : `team-${i % 5}` }), 10, 10_000).then((answer) => ({ i, answer }));
    });
    const answered = await Promise.all(others);
    for (const { i, answer } of answered) {
      if (i % 2 === 0) assert.equal(answer.allowed, true, `review ${i}: ${answer.message}`);
      else {
        assert.equal(answer.allowed, false, `review ${i}`);
        assert.match(answer.message, /Docker Hub is not allowed/);
      }
    }
    // Failing closed (the default), the policies whose conditions could not finish deny, saying why.
    const cut = await slow;
    assert.equal(cut.allowed, false);
    assert.match(cut.message, /evaluation cancelled: the review ran past its deadline/);
  },
);
