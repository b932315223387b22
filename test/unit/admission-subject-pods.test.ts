// subjectOfRequest (src/core/admission-subject.ts): which pods an admission request asks PodRestrictions to
// judge, and with which field paths.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AdmissionRequest } from "../../src/core/admission-review.ts";
import { imagesByPod, subjectOfImageReview, subjectOfObject, subjectOfRequest } from "../../src/core/admission-subject.ts";
import { compilePodRestriction, podRestrictionFindings, type PodRestriction } from "../../src/core/pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../../src/core/pod-under-review.ts";
import { compileImagePath } from "../../src/core/image-paths.ts";
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

describe("the subject of a request, as denials, audit records and policies see it", () => {
  const runner: TemplateKind = { group: "ci.example.com", kind: "Runner", templates: [], podSpecs: ["spec.pods[*]"] };
  const RUNNERS = { group: "ci.example.com", version: "v1", resource: "runners" };
  const runnerObject = (images: string[]) => ({
    apiVersion: "ci.example.com/v1",
    kind: "Runner",
    metadata: { name: "r", namespace: "team-a", annotations: { "x.image-policy.k8s.io/k": "v" } },
    spec: { pods: images.map((image) => ({ containers: [{ name: "c", image }] })) },
  });
  const subject = (req: AdmissionRequest, templateKinds: TemplateKind[] = []) => {
    const plan = subjectOfRequest(req, { templateKinds });
    assert.ok(plan.review, plan.review ? "" : plan.why);
    return plan.subject;
  };

  it("names the object by its apiVersion, kind and name, falling back on what the request says", () => {
    // Kubernetes sends apiVersion and kind with the object; the request's kind stands in when they are missing.
    assert.deepEqual(subject(request({ name: "web", object: { kind: "Pod", metadata: {}, spec: { containers: [plain] } } })).object, {
      apiVersion: "v1",
      kind: "Pod",
      name: "web",
    });
    const deployment = { group: "apps", version: "v1", kind: "Deployment" };
    const DEPLOYMENTS = { group: "apps", version: "v1", resource: "deployments" };
    const template = { spec: { template: { spec: { containers: [plain] } } } };
    const named = (metadata: Record<string, unknown>, name?: string) =>
      subject(
        request({
          kind: deployment,
          resource: DEPLOYMENTS,
          ...(name ? { name } : {}),
          object: { apiVersion: "apps/v1", kind: "Deployment", metadata, ...template },
        }),
      ).object.name;
    assert.equal(named({ name: "mine" }), "mine");
    assert.equal(named({ name: "mine" }, "sent"), "mine");
    assert.equal(named({ generateName: "web-" }), "web-");
    assert.equal(named({ generateName: "web-" }, "sent"), "sent");
    assert.equal(named({}), "");
    assert.equal(named({ name: 7 }), "");
  });

  it("an object of unknown kind that runs no pods says so", () => {
    const plan = subjectOfRequest({
      uid: "u",
      operation: "CREATE",
      namespace: "n",
      resource: { group: "", version: "v1", resource: "configmaps" },
      object: { metadata: {} },
    });
    assert.deepEqual(plan, { review: false, why: "object runs no pods" });
  });

  it("a Pod-shaped body sent for another resource is not reviewed as a pod", () => {
    const body = podObject({ containers: [privileged] });
    for (const resource of [
      { group: "example.com", version: "v1", resource: "pods" },
      { group: "", version: "v1", resource: "configmaps" },
    ]) {
      assert.deepEqual(
        subjectOfRequest(request({ resource, object: body })),
        { review: false, why: `not a pod (resource ${resource.resource})` },
        resource.group,
      );
    }
  });

  it("v1.20 ephemeral containers are judged alone, with only the new ones reviewed", () => {
    const obj = (images: string[]) => ({
      apiVersion: "v1",
      kind: "EphemeralContainers",
      metadata: { name: "web", namespace: "team-a", annotations: { "x.image-policy.k8s.io/k": "v" } },
      ephemeralContainers: images.map((image, i) => ({ name: `dbg${i}`, image })),
    });
    const req = request({
      operation: "UPDATE",
      subResource: "ephemeralcontainers",
      kind: { group: "", version: "v1", kind: "EphemeralContainers" },
      object: obj(["busybox:1", "busybox:2"]),
      oldObject: obj(["busybox:1"]),
    });
    assert.deepEqual(subject(req), {
      origin: "object",
      namespace: "team-a",
      object: { apiVersion: "v1", kind: "Pod", name: "web" },
      pods: [
        {
          metadata: { value: undefined, field: "metadata" },
          spec: { value: { ephemeralContainers: obj(["busybox:1", "busybox:2"]).ephemeralContainers }, field: "" },
          isTemplate: false,
          onlyContainers: true,
          annotations: { "x.image-policy.k8s.io/k": "v" },
        },
      ],
      images: [{ image: "busybox:2", field: "ephemeralContainers[1].image", pod: 0 }],
      judgePods: true,
      request: req,
    });
  });

  it("later ephemeral container updates send the whole pod, and are judged even when nothing else changed", () => {
    const pod = podObject({ containers: [privileged], ephemeralContainers: [{ name: "dbg", image: "busybox:1" }] });
    const s = subject(request({ operation: "UPDATE", subResource: "ephemeralcontainers", object: pod, oldObject: pod }));
    assert.equal(s.judgePods, true);
    assert.equal(s.origin, "object");
    assert.deepEqual(s.images, []);
  });

  it("an update that adds or removes a pod of a custom resource is judged", () => {
    const grown = subject(request({ operation: "UPDATE", resource: RUNNERS, object: runnerObject(["a:1", "b:1"]), oldObject: runnerObject(["a:1"]) }), [
      runner,
    ]);
    assert.deepEqual(grown.images, [{ image: "b:1", field: "spec.pods[1].containers[0].image", pod: 1 }]);
    assert.equal(grown.origin, "object");
    const shrunk = subject(request({ operation: "UPDATE", resource: RUNNERS, object: runnerObject(["a:1"]), oldObject: runnerObject(["a:1", "b:1"]) }), [
      runner,
    ]);
    assert.deepEqual(shrunk.images, []);
    assert.equal(shrunk.judgePods, true);
  });

  it("images are grouped by their pod, pods with nothing to review left out", () => {
    const s = subject(request({ operation: "UPDATE", resource: RUNNERS, object: runnerObject(["a:1", "b:2"]), oldObject: runnerObject(["a:1", "b:1"]) }), [
      runner,
    ]);
    assert.deepEqual(
      imagesByPod(s).map((g) => ({ field: g.pod.spec.field, images: g.images })),
      [{ field: "spec.pods[1]", images: [{ image: "b:2", field: "spec.pods[1].containers[0].image", pod: 1 }] }],
    );
  });

  it("pins are recorded on a template's metadata, and on the object for bare pod specs", () => {
    const obj = runnerObject(["a:1"]);
    assert.deepEqual(subject(request({ resource: RUNNERS, object: obj }), [runner]).pods[0]!.pinRecord, { value: obj.metadata, field: "metadata" });
    const deployment = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web" },
      spec: { template: { metadata: { labels: { app: "web" } }, spec: { containers: [plain] } } },
    };
    const s = subject(request({ resource: { group: "apps", version: "v1", resource: "deployments" }, object: deployment }));
    assert.deepEqual(s.pods[0]!.pinRecord, { value: { labels: { app: "web" } }, field: "spec.template.metadata" });
    assert.equal(s.origin, "object");
  });
});

describe("images a custom resource keeps outside its pods (imagePaths)", () => {
  const runner: TemplateKind = { group: "ci.example.com", kind: "Runner", templates: [], podSpecs: ["spec.pods[*]"] };
  const sidecars = compileImagePath({ kinds: ["Runner"], path: "{{ spec.sidecars[*] }}" }, "p", ["spec", "imagePaths", 0]).imagePath!;
  const extraction = { templateKinds: [runner], imagePaths: [sidecars] };
  const RUNNERS = { group: "ci.example.com", version: "v1", resource: "runners" };
  const runnerObject = (pods: string[], sidecarImages: string[]) => ({
    apiVersion: "ci.example.com/v1",
    kind: "Runner",
    metadata: { name: "r", annotations: { "x.image-policy.k8s.io/k": "v" } },
    spec: { pods: pods.map((image) => ({ containers: [{ name: "c", image }] })), sidecars: sidecarImages.map((image) => ({ image })) },
  });

  it("are one more entry, pinned on the object's metadata, and in a cluster-scoped object in no namespace", () => {
    const obj = runnerObject(["a:1"], ["side:1"]);
    const plan = subjectOfRequest(
      { uid: "u", operation: "CREATE", resource: RUNNERS, kind: { group: "ci.example.com", version: "v1", kind: "Runner" }, object: obj },
      extraction,
    );
    assert.ok(plan.review);
    assert.equal(plan.subject.namespace, "");
    assert.deepEqual(plan.subject.pods[1], {
      metadata: { value: obj.metadata, field: "metadata" },
      spec: { value: undefined, field: "" },
      isTemplate: true,
      annotations: { "x.image-policy.k8s.io/k": "v" },
      pinRecord: { value: obj.metadata, field: "metadata" },
      pathImages: [{ image: "side:1", field: "spec.sidecars[0].image" }],
    });
  });

  it("are found in a manifest checked offline that has no metadata", () => {
    const { metadata: _, ...obj } = runnerObject([], ["side:1"]);
    const plan = subjectOfObject(obj, extraction);
    assert.ok(plan.review);
    assert.deepEqual(plan.subject.pods[0]!.annotations, {});
    assert.deepEqual(plan.subject.images, [{ image: "side:1", field: "spec.sidecars[0].image", pod: 0 }]);
  });

  it("an update that turns them into a pod of its own has that pod judged", () => {
    const plan = subjectOfRequest(
      request({ operation: "UPDATE", resource: RUNNERS, object: runnerObject(["a:1", "side:1"], []), oldObject: runnerObject(["a:1"], ["side:1"]) }),
      extraction,
    );
    assert.ok(plan.review);
    assert.equal(plan.subject.judgePods, true);
  });
});

describe("a manifest checked offline", () => {
  it("is a CREATE of its kind in its namespace, or the default one", () => {
    const pod = { apiVersion: "v1", kind: "Pod", spec: { containers: [plain] } };
    const plan = subjectOfObject(pod);
    assert.ok(plan.review);
    assert.equal(plan.subject.namespace, "default");
    assert.deepEqual(plan.subject.request, {
      uid: "",
      operation: "CREATE",
      namespace: "default",
      name: "",
      object: pod,
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
    });
    const named = subjectOfObject({ ...pod, metadata: { name: "web", namespace: "team-a" } }, {}, "elsewhere");
    assert.ok(named.review);
    assert.equal(named.subject.namespace, "team-a");
    assert.equal(named.subject.request.name, "web");
    assert.equal(named.subject.object.name, "web");
    // What a manifest leaves out stays empty, as kubectl would refuse it.
    const bare = subjectOfObject({ kind: "Pod", metadata: {}, spec: { containers: [plain] } });
    assert.ok(bare.review);
    assert.deepEqual(bare.subject.request.kind, { group: "", version: "", kind: "Pod" });
    assert.deepEqual(subjectOfObject({ metadata: { name: "x" } }), { review: false, why: "object runs no pods" });
  });
});

describe("an ImageReview", () => {
  it("is one pod of its images in its namespace, created, whose pod restrictions are not judged", () => {
    const annotations = { "x.image-policy.k8s.io/k": "v" };
    const containers = [{ image: "nginx:1" }, { image: "redis:7" }];
    assert.deepEqual(subjectOfImageReview({ containers, annotations, namespace: "team-a" }), {
      origin: "imagereview",
      namespace: "team-a",
      object: { apiVersion: "v1", kind: "Pod", name: "" },
      pods: [{ metadata: { value: { annotations }, field: "metadata" }, spec: { value: { containers }, field: "spec" }, isTemplate: false, annotations }],
      images: [
        { image: "nginx:1", field: "spec.containers[0].image", pod: 0 },
        { image: "redis:7", field: "spec.containers[1].image", pod: 0 },
      ],
      judgePods: false,
      request: {
        uid: "",
        operation: "CREATE",
        namespace: "team-a",
        kind: { group: "", version: "v1", kind: "Pod" },
        resource: { group: "", version: "v1", resource: "pods" },
        object: { apiVersion: "v1", kind: "Pod", metadata: { namespace: "team-a", annotations }, spec: { containers } },
      },
    });
    const bare = subjectOfImageReview({ containers });
    assert.equal(bare.namespace, "");
    assert.equal(bare.request.namespace, "");
    assert.deepEqual(bare.request.object, { apiVersion: "v1", kind: "Pod", metadata: { namespace: "", annotations: {} }, spec: { containers } });
    assert.deepEqual(bare.pods[0]!.annotations, {});
  });
});
