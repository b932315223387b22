// subjectOfRequest (src/core/admission-subject.ts): which pods an admission request asks PodRestrictions to
// judge, and with which field paths.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AdmissionRequest } from "../../src/core/admission-review.ts";
import { subjectOfRequest } from "../../src/core/admission-subject.ts";
import { compilePodRestriction, podRestrictionFindings, type PodRestriction } from "../../src/core/pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../../src/core/pod-under-review.ts";
import type { TemplateKind } from "../../src/core/workload-templates.ts";

const PODS = { group: "", version: "v1", resource: "pods" };

function request(extra: Partial<AdmissionRequest>): AdmissionRequest {
  return { uid: "u-1", operation: "CREATE", namespace: "team-a", resource: PODS, kind: { group: "", version: "v1", kind: "Pod" }, ...extra };
}

function podObject(spec: Record<string, unknown>, metadata: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: "v1", kind: "Pod", metadata: { name: "web", namespace: "team-a", ...metadata }, spec };
}

const privileged = { name: "app", image: "nginx", securityContext: { privileged: true } };
const plain = { name: "app", image: "nginx" };

/** No privileged containers, in any container list (init and ephemeral default to containers). */
const noPrivileged: PodRestriction = (() => {
  const r = compilePodRestriction({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "PodRestriction",
    metadata: { name: "no-privileged" },
    spec: {
      metadata: { labels: { forbiddenKeys: ["debug"] } },
      spec: { securityContext: { hostNetwork: { require: false } }, containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }] },
    },
  });
  assert.deepEqual(r.issues, []);
  return r.policy!;
})();

function reviewed(req: AdmissionRequest, extraKinds?: TemplateKind[]): { namespace: string; pods: PodUnderReview[] } {
  const plan = subjectOfRequest(req, { templateKinds: extraKinds ?? [] });
  assert.equal(plan.review, true, plan.review ? "" : plan.why);
  if (!plan.review) throw new Error("unreachable");
  assert.equal(plan.subject.judgePods, true);
  return plan.subject;
}

function skipped(req: AdmissionRequest, extraKinds?: TemplateKind[]): string {
  const plan = subjectOfRequest(req, { templateKinds: extraKinds ?? [] });
  assert.equal(plan.review, false);
  if (plan.review) throw new Error("unreachable");
  return plan.why;
}

describe("subjectOfRequest: Pods", () => {
  it("a Pod CREATE is reviewed, with the pod's metadata and spec", () => {
    const obj = podObject({ containers: [privileged] }, { labels: { app: "web" } });
    const plan = reviewed(request({ object: obj }));
    assert.equal(plan.namespace, "team-a");
    assert.equal(plan.pods.length, 1);
    const [pod] = plan.pods;
    assert.deepEqual(pod!.metadata, { value: obj.metadata, field: "metadata" });
    assert.deepEqual(pod!.spec, { value: obj.spec, field: "spec" });
    assert.equal(pod!.isTemplate, false);
    assert.deepEqual(
      podRestrictionFindings(noPrivileged, pod!).map((f) => f.field),
      ["spec.containers[0].securityContext.privileged"],
    );
  });

  it("the namespace falls back to the object's metadata", () => {
    const plan = reviewed(request({ namespace: undefined, object: podObject({ containers: [plain] }, { namespace: "from-object" }) }));
    assert.equal(plan.namespace, "from-object");
  });

  describe("UPDATE", () => {
    const before = podObject({ containers: [privileged] }, { labels: { app: "web" }, annotations: { a: "1" }, resourceVersion: "1" });
    const cases: Array<{ name: string; after: Record<string, unknown>; review: boolean }> = [
      {
        name: "with nothing restricted changed (finalizers, resourceVersion)",
        after: podObject({ containers: [privileged] }, { labels: { app: "web" }, annotations: { a: "1" }, resourceVersion: "2", finalizers: ["x"] }),
        review: false,
      },
      {
        name: "with changed labels",
        after: podObject({ containers: [privileged] }, { labels: { app: "web", debug: "1" }, annotations: { a: "1" } }),
        review: true,
      },
      { name: "with removed labels", after: podObject({ containers: [privileged] }, { annotations: { a: "1" } }), review: true },
      { name: "with changed annotations", after: podObject({ containers: [privileged] }, { labels: { app: "web" }, annotations: { a: "2" } }), review: true },
      {
        name: "with a changed spec (image)",
        after: podObject({ containers: [{ ...privileged, image: "nginx:2" }] }, { labels: { app: "web" }, annotations: { a: "1" } }),
        review: true,
      },
      {
        name: "with a changed spec (activeDeadlineSeconds)",
        after: podObject({ containers: [privileged], activeDeadlineSeconds: 30 }, { labels: { app: "web" }, annotations: { a: "1" } }),
        review: true,
      },
    ];
    for (const t of cases) {
      it(`${t.name} is ${t.review ? "reviewed" : "skipped"}`, () => {
        const req = request({ operation: "UPDATE", object: t.after, oldObject: before });
        if (t.review) assert.equal(reviewed(req).pods.length, 1);
        else assert.equal(skipped(req), "no restricted field changed");
      });
    }

    it("without an old object is reviewed", () => {
      assert.equal(reviewed(request({ operation: "UPDATE", object: before })).pods.length, 1);
    });
  });

  const skippedOps: Array<{ operation: string; why: string }> = [
    { operation: "DELETE", why: "operation DELETE" },
    { operation: "CONNECT", why: "operation CONNECT" },
  ];
  for (const t of skippedOps) {
    it(`${t.operation} is skipped`, () => {
      assert.equal(skipped(request({ operation: t.operation, object: podObject({ containers: [privileged] }) })), t.why);
    });
  }

  it("a request without an object is skipped", () => {
    assert.equal(skipped(request({ object: null })), "no object");
  });

  for (const sub of ["status", "binding", "eviction", "exec", "resize"]) {
    it(`the ${sub} subresource is skipped`, () => {
      assert.equal(skipped(request({ operation: "UPDATE", subResource: sub, object: podObject({ containers: [privileged] }) })), `subresource ${sub}`);
    });
  }

  it("an object that runs no pods is skipped", () => {
    const why = skipped(
      request({
        resource: { group: "", version: "v1", resource: "configmaps" },
        kind: { kind: "ConfigMap" },
        object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } },
      }),
    );
    assert.equal(why, "ConfigMap runs no pods");
  });
});

describe("subjectOfRequest: ephemeral containers", () => {
  it("Kubernetes 1.20 (kind EphemeralContainers): only the ephemeral containers are judged", () => {
    const obj = {
      apiVersion: "v1",
      kind: "EphemeralContainers",
      metadata: { name: "web", namespace: "team-a" },
      ephemeralContainers: [{ name: "debug", image: "busybox", securityContext: { privileged: true } }],
    };
    const plan = reviewed(
      request({ operation: "UPDATE", subResource: "ephemeralcontainers", kind: { group: "", version: "v1", kind: "EphemeralContainers" }, object: obj }),
    );
    assert.equal(plan.pods.length, 1);
    const pod = plan.pods[0]!;
    assert.equal(pod.onlyContainers, true);
    assert.equal(pod.isTemplate, false);
    // Pod-level restrictions (metadata labels, hostNetwork) cannot be judged and are skipped; the container is.
    assert.deepEqual(podRestrictionFindings(noPrivileged, pod), [
      {
        field: "ephemeralContainers[0].securityContext.privileged",
        rule: "spec.spec.containers[0].securityContext.privileged",
        message: "is true; must be false",
      },
    ]);
  });

  it("Kubernetes 1.22+ (kind Pod on the subresource): the whole pod is judged", () => {
    const obj = podObject({
      hostNetwork: true,
      containers: [plain],
      ephemeralContainers: [{ name: "debug", image: "busybox", securityContext: { privileged: true } }],
    });
    const plan = reviewed(
      request({ operation: "UPDATE", subResource: "ephemeralcontainers", object: obj, oldObject: podObject({ hostNetwork: true, containers: [plain] }) }),
    );
    assert.equal(plan.pods.length, 1);
    assert.notEqual(plan.pods[0]!.onlyContainers, true);
    assert.deepEqual(
      podRestrictionFindings(noPrivileged, plan.pods[0]!)
        .map((f) => f.field)
        .sort(),
      ["spec.ephemeralContainers[0].securityContext.privileged", "spec.hostNetwork"],
    );
  });
});

describe("subjectOfRequest: workload templates", () => {
  const workloads: Array<{ name: string; group: string; resource: string; obj: Record<string, unknown>; prefix: string }> = [
    {
      name: "Deployment",
      group: "apps",
      resource: "deployments",
      obj: {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "d" },
        spec: { template: { metadata: { labels: { debug: "1" } }, spec: { containers: [privileged] } } },
      },
      prefix: "spec.template",
    },
    {
      name: "DaemonSet",
      group: "apps",
      resource: "daemonsets",
      obj: {
        apiVersion: "apps/v1",
        kind: "DaemonSet",
        metadata: { name: "d" },
        spec: { template: { metadata: { labels: { debug: "1" } }, spec: { containers: [privileged] } } },
      },
      prefix: "spec.template",
    },
    {
      name: "Job",
      group: "batch",
      resource: "jobs",
      obj: {
        apiVersion: "batch/v1",
        kind: "Job",
        metadata: { name: "j" },
        spec: { template: { metadata: { labels: { debug: "1" } }, spec: { containers: [privileged] } } },
      },
      prefix: "spec.template",
    },
    {
      name: "CronJob",
      group: "batch",
      resource: "cronjobs",
      obj: {
        apiVersion: "batch/v1",
        kind: "CronJob",
        metadata: { name: "c" },
        spec: { schedule: "* * * * *", jobTemplate: { spec: { template: { metadata: { labels: { debug: "1" } }, spec: { containers: [privileged] } } } } },
      },
      prefix: "spec.jobTemplate.spec.template",
    },
  ];
  for (const w of workloads) {
    it(`a ${w.name}'s pod template is judged with field paths under ${w.prefix}`, () => {
      const plan = reviewed(
        request({ resource: { group: w.group, version: "v1", resource: w.resource }, kind: { group: w.group, version: "v1", kind: w.name }, object: w.obj }),
      );
      assert.equal(plan.pods.length, 1);
      const pod = plan.pods[0]!;
      assert.equal(pod.isTemplate, true);
      assert.equal(pod.spec.field, `${w.prefix}.spec`);
      assert.equal(pod.metadata.field, `${w.prefix}.metadata`);
      assert.deepEqual(
        podRestrictionFindings(noPrivileged, pod).map((f) => f.field),
        [`${w.prefix}.metadata.labels[debug]`, `${w.prefix}.spec.containers[0].securityContext.privileged`],
      );
    });
  }

  it("a workload UPDATE that only scales is skipped; one that changes the template is reviewed", () => {
    const deployment = (replicas: number, image: string) => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "d" },
      spec: { replicas, template: { spec: { containers: [{ ...privileged, image }] } } },
    });
    const base = { operation: "UPDATE", resource: { group: "apps", version: "v1", resource: "deployments" } };
    assert.equal(skipped(request({ ...base, object: deployment(3, "nginx"), oldObject: deployment(1, "nginx") })), "no restricted field changed");
    assert.equal(reviewed(request({ ...base, object: deployment(3, "nginx:2"), oldObject: deployment(1, "nginx") })).pods.length, 1);
  });

  it("a workload from an unknown group is not a built-in kind", () => {
    const obj = { apiVersion: "example.com/v1", kind: "Deployment", metadata: { name: "d" }, spec: { template: { spec: { containers: [privileged] } } } };
    assert.equal(skipped(request({ resource: { group: "example.com", version: "v1", resource: "deployments" }, object: obj })), "Deployment runs no pods");
  });

  it("a registered custom kind with a [*] path yields one pod per element", () => {
    const pipeline: TemplateKind = { group: "ci.example.com", kind: "Pipeline", templates: ["spec.tasks[*].template"] };
    const obj = {
      apiVersion: "ci.example.com/v1",
      kind: "Pipeline",
      metadata: { name: "build" },
      spec: {
        tasks: [
          { name: "compile", template: { spec: { containers: [plain] } } },
          { name: "no-template" },
          { name: "push", template: { metadata: { labels: { debug: "1" } }, spec: { containers: [plain, privileged] } } },
        ],
      },
    };
    const req = request({
      resource: { group: "ci.example.com", version: "v1", resource: "pipelines" },
      kind: { group: "ci.example.com", version: "v1", kind: "Pipeline" },
      object: obj,
    });
    assert.equal(skipped(req), "Pipeline runs no pods");
    const plan = reviewed(req, [pipeline]);
    assert.deepEqual(
      plan.pods.map((p) => p.spec.field),
      ["spec.tasks[0].template.spec", "spec.tasks[2].template.spec"],
    );
    assert.ok(plan.pods.every((p) => p.isTemplate));
    assert.deepEqual(podRestrictionFindings(noPrivileged, plan.pods[0]!), []);
    assert.deepEqual(
      podRestrictionFindings(noPrivileged, plan.pods[1]!).map((f) => f.field),
      ["spec.tasks[2].template.metadata.labels[debug]", "spec.tasks[2].template.spec.containers[1].securityContext.privileged"],
    );
  });

  it("a registered custom kind with bare pod specs", () => {
    const runner: TemplateKind = { group: "ci.example.com", kind: "Runner", templates: [], podSpecs: ["spec.pods[*]"] };
    const obj = {
      apiVersion: "ci.example.com/v1",
      kind: "Runner",
      metadata: { name: "r" },
      spec: { pods: [{ containers: [plain] }, { containers: [privileged] }] },
    };
    const plan = reviewed(request({ resource: { group: "ci.example.com", version: "v1", resource: "runners" }, object: obj }), [runner]);
    assert.deepEqual(
      plan.pods.map((p) => p.spec.field),
      ["spec.pods[0]", "spec.pods[1]"],
    );
    assert.deepEqual(
      podRestrictionFindings(noPrivileged, plan.pods[1]!).map((f) => f.field),
      ["spec.pods[1].containers[0].securityContext.privileged"],
    );
  });
});
