// A namespaced policy decides for requests of its own namespace and nothing else (docs/namespaced-policies.md):
// whatever its text does — a matchCondition that errors on every unlabelled pod, a namespaceSelector whose
// labels are unknown — requests of other namespaces and cluster-scoped requests never see it. Through the paths
// a user takes: the real `imprimatur serve` (/validate, /mutate, /imagereview) and the `check` command. The
// background scan's side is test/e2e/namespaced-policy-reach.test.ts.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { imageReview, podReview } from "../support/admission.ts";
import { imprimatur } from "../support/cli-process.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { NO_DOCKER_HUB, TEAM_A_CONDITION_ERROR as CONDITION_ERROR, TEAM_A_FAILING_CONDITION } from "../support/tenant-policies.ts";

/** team-a's policy scoped by a namespace selector: only team-a's labels are known to the server. */
const TEAM_A_SELECTOR = `apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: tier-images, namespace: team-a}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {tier: tenant}}
  rules:
    - {action: allow, images: ["registry.example.com/*"]}
  defaultMessage: team-a runs images of registry.example.com only
`;
const NAMESPACES_FILE = "team-a: {tier: tenant}\n";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-namespaced-reach-"));
  await writeFile(join(dir, "condition.yaml"), `${NO_DOCKER_HUB}---\n${TEAM_A_FAILING_CONDITION}`);
  await writeFile(join(dir, "selector.yaml"), `${NO_DOCKER_HUB}---\n${TEAM_A_SELECTOR}`);
  await writeFile(join(dir, "namespaces.yaml"), NAMESPACES_FILE);
});
after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface AdmissionAnswer {
  allowed: boolean;
  status?: { message?: string };
  warnings?: string[];
  patch?: string;
  auditAnnotations?: Record<string, string>;
}

async function ask(server: ImprimaturProcess, path: "/validate" | "/mutate", body: unknown): Promise<AdmissionAnswer> {
  const r = await postJson(`${server.baseUrl}${path}`, server.ca, body);
  assert.equal(r.status, 200, r.text);
  return (r.body as { response: AdmissionAnswer }).response;
}

async function reviewImages(server: ImprimaturProcess, namespace: string | undefined, images: string[]) {
  const body = imageReview(images, namespace);
  if (namespace === undefined) delete (body.spec as { namespace?: string }).namespace;
  const r = await postJson(`${server.baseUrl}/imagereview`, server.ca, body);
  assert.equal(r.status, 200, r.text);
  return (r.body as { status: { allowed: boolean; reason?: string; auditAnnotations?: Record<string, string> } }).status;
}

/** Nothing of team-a's in an answer: not in its message, warnings, patch or audit annotations. */
function assertNoTeamA(answer: unknown, what: string): void {
  assert.doesNotMatch(JSON.stringify(answer), /team-a/, `${what}: ${JSON.stringify(answer)}`);
}

const privilegedPod = (namespace: string) => {
  const review = podReview({ images: ["quay.io/web:1"], namespace });
  (review.request.object.spec.containers[0] as Record<string, unknown>).securityContext = { privileged: true };
  return review;
};

describe("serve: a namespace's failing matchCondition decides for its namespace only", () => {
  let server: ImprimaturProcess;
  before(async () => {
    server = await startImprimatur(["--policies", join(dir, "condition.yaml")]);
  });
  after(async () => {
    await server?.stop();
  });

  it("/validate admits pods of prod and kube-system, or denies them by the cluster policy alone", async () => {
    for (const namespace of ["prod", "kube-system"]) {
      const admitted = await ask(server, "/validate", podReview({ images: ["quay.io/web:1"], namespace }));
      assert.equal(admitted.allowed, true, `${namespace}: ${JSON.stringify(admitted)}`);
      assertNoTeamA(admitted, namespace);
      const privileged = await ask(server, "/validate", privilegedPod(namespace));
      assert.equal(privileged.allowed, true, `${namespace}: team-a's NamespacedPodRestriction is not ${namespace}'s: ${JSON.stringify(privileged)}`);
      const hub = await ask(server, "/validate", podReview({ images: ["docker.io/library/nginx:1"], namespace }));
      assert.equal(hub.allowed, false);
      assert.match(hub.status?.message ?? "", /denied by policy no-docker-hub rules\[0\]: Docker Hub is not allowed/);
      assertNoTeamA(hub, namespace);
    }
  });

  it("/validate still fails closed in team-a, with the condition's error", async () => {
    const denied = await ask(server, "/validate", podReview({ images: ["registry.example.com/app:1"], namespace: "team-a" }));
    assert.equal(denied.allowed, false);
    assert.match(denied.status?.message ?? "", CONDITION_ERROR);
    assert.match(denied.status?.message ?? "", /NamespacedPodRestriction team-a\/team-unprivileged matchConditions\[team-pods\]/);
  });

  it("/mutate answers prod and kube-system without anything of team-a's", async () => {
    for (const namespace of ["prod", "kube-system"]) {
      const answer = await ask(server, "/mutate", podReview({ images: ["quay.io/web:1"], namespace }));
      assert.equal(answer.allowed, true, namespace);
      assert.equal(answer.patch, undefined, namespace);
      assertNoTeamA(answer, namespace);
    }
  });

  it("/imagereview admits images for prod and kube-system (and for no namespace), denies team-a's with the condition's error", async () => {
    for (const namespace of ["prod", "kube-system", undefined]) {
      const status = await reviewImages(server, namespace, ["quay.io/web:1"]);
      assert.equal(status.allowed, true, `${namespace}: ${JSON.stringify(status)}`);
      assertNoTeamA(status, String(namespace));
    }
    const denied = await reviewImages(server, "team-a", ["registry.example.com/app:1"]);
    assert.equal(denied.allowed, false);
    assert.match(denied.reason ?? "", CONDITION_ERROR);
  });

  it("a cluster-scoped request is judged by cluster policies only, whatever namespace its object claims", async () => {
    // A pod template in a cluster-scoped custom resource (a mutating webhook sees the object before the apiserver
    // clears its metadata.namespace): the request has no namespace, so no namespace's policy is asked.
    const serverConfig = join(dir, "server-config.yaml");
    await writeFile(
      serverConfig,
      'apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\npodTemplates:\n  - {apiVersion: ci.example.com/v1, kind: Runner, resource: runners, templates: ["spec.template"]}\n',
    );
    const withRunners = await startImprimatur(["--policies", join(dir, "condition.yaml"), "--config", serverConfig]);
    try {
      const runner = {
        apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        request: {
          uid: randomUUID(),
          kind: { group: "ci.example.com", version: "v1", kind: "Runner" },
          resource: { group: "ci.example.com", version: "v1", resource: "runners" },
          name: "r",
          operation: "CREATE",
          userInfo: { username: "alice" },
          object: {
            apiVersion: "ci.example.com/v1",
            kind: "Runner",
            metadata: { name: "r", namespace: "team-a" },
            spec: { template: { metadata: {}, spec: { containers: [{ name: "c", image: "quay.io/runner:1" }] } } },
          },
        },
      };
      for (const path of ["/validate", "/mutate"] as const) {
        const answer = await ask(withRunners, path, runner);
        assert.equal(answer.allowed, true, `${path}: ${JSON.stringify(answer)}`);
        assertNoTeamA(answer, path);
      }
      // The same object in team-a (the request names the namespace) is team-a's.
      const inTeamA = await ask(withRunners, "/validate", { ...runner, request: { ...runner.request, uid: randomUUID(), namespace: "team-a" } });
      assert.equal(inTeamA.allowed, false);
      assert.match(inTeamA.status?.message ?? "", CONDITION_ERROR);
    } finally {
      await withRunners.stop();
    }
  });
});

describe("serve: a namespace's namespaceSelector is not asked about other namespaces", () => {
  let server: ImprimaturProcess;
  before(async () => {
    // The server knows team-a's labels only: prod's and kube-system's are unknown to it.
    server = await startImprimatur(["--policies", join(dir, "selector.yaml"), "--namespaces", join(dir, "namespaces.yaml")]);
  });
  after(async () => {
    await server?.stop();
  });

  it("/validate and /imagereview admit prod and kube-system although their labels are unknown", async () => {
    for (const namespace of ["prod", "kube-system"]) {
      const admitted = await ask(server, "/validate", podReview({ images: ["quay.io/web:1"], namespace }));
      assert.equal(admitted.allowed, true, `${namespace}: ${JSON.stringify(admitted)}`);
      assertNoTeamA(admitted, namespace);
      const reviewed = await reviewImages(server, namespace, ["quay.io/web:1"]);
      assert.equal(reviewed.allowed, true, `${namespace}: ${JSON.stringify(reviewed)}`);
      const mutated = await ask(server, "/mutate", podReview({ images: ["quay.io/web:1"], namespace }));
      assert.equal(mutated.allowed, true);
      assertNoTeamA(mutated, namespace);
    }
  });

  it("the selector still decides in team-a", async () => {
    const denied = await ask(server, "/validate", podReview({ images: ["quay.io/web:1"], namespace: "team-a" }));
    assert.equal(denied.allowed, false);
    assert.match(
      denied.status?.message ?? "",
      /denied by NamespacedImagePolicy team-a\/tier-images default: team-a runs images of registry\.example\.com only/,
    );
  });
});

describe("check: team-a's policies judge team-a's objects only", () => {
  const pod = (name: string, namespace: string, image: string) =>
    `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: ${namespace}}\nspec: {containers: [{name: c, image: "${image}", securityContext: {privileged: true}}]}\n`;

  it("a failing condition denies in team-a only", async () => {
    const pods = join(dir, "condition-pods.yaml");
    await writeFile(
      pods,
      [pod("web", "prod", "quay.io/web:1"), pod("dns", "kube-system", "quay.io/dns:1"), pod("app", "team-a", "registry.example.com/app:1")].join("---\n"),
    );
    const res = await imprimatur(["check", "--policies", join(dir, "condition.yaml"), "-f", pods]);
    assert.equal(res.code, 1, res.stderr);
    const lines = res.stdout.trimEnd().split("\n");
    assert.deepEqual(
      [...new Set(lines.filter((l) => /team-a/.test(l)).map((l) => l.replace(/:.*/, "")))],
      [`${pods} team-a/Pod/app`],
      `only team-a's pod is judged by team-a's policies:\n${res.stdout}`,
    );
    assert.match(res.stdout, CONDITION_ERROR);
    assert.equal(lines.at(-1), "3 objects: 2 allowed, 1 denied, 0 skipped");
  });

  it("a namespace selector asks for no other namespace's labels; -n places objects without a namespace", async () => {
    const pods = join(dir, "selector-pods.yaml");
    await writeFile(pods, [pod("web", "prod", "quay.io/web:1"), pod("app", "team-a", "quay.io/app:1")].join("---\n"));
    const res = await imprimatur(["check", "--policies", join(dir, "selector.yaml"), "--namespaces", join(dir, "namespaces.yaml"), "-f", pods]);
    assert.equal(res.code, 1, res.stderr);
    assert.equal(res.stdout.trimEnd().split("\n").at(-1), "2 objects: 1 allowed, 1 denied, 0 skipped", res.stdout);
    assert.match(res.stdout, /Pod\/app: denied: .*NamespacedImagePolicy team-a\/tier-images default/);
    assert.doesNotMatch(res.stdout, /Pod\/web: denied/);

    const unplaced = join(dir, "unplaced-pod.yaml");
    await writeFile(unplaced, pod("web", "x", "quay.io/web:1").replace(", namespace: x", ""));
    const inKubeSystem = await imprimatur([
      "check",
      "--policies",
      join(dir, "selector.yaml"),
      "--namespaces",
      join(dir, "namespaces.yaml"),
      "-n",
      "kube-system",
      "-f",
      unplaced,
    ]);
    assert.equal(inKubeSystem.code, 0, inKubeSystem.stdout + inKubeSystem.stderr);
  });
});
