// Edges of PodSpecRestriction: which pod-level fields are pointers (unset is nil, so the nil rules apply) and
// which read as their zero value; OCI image volumes held to the `containers` image restrictions unless
// `volumes` restricts `image.reference` itself; null container lists; and pods of which only the containers
// are judged (ephemeral containers added to a running pod).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { subjectOfRequest } from "../../../src/core/admission-subject.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";
import { APP, compileRestriction, fieldsOf, findingsFor, podUnder, restrictionOf } from "./edge-support.ts";

const compile = (spec: unknown) => compileRestriction(spec);
const policy = (spec: unknown) => restrictionOf(spec);
const findings = findingsFor;
const under = podUnder;
const app = APP;

describe("pod-level fields: pointers and zero values", () => {
  const pointers: Array<{ field: string; restriction: Record<string, unknown>; unset: string }> = [
    { field: "terminationGracePeriodSeconds", restriction: { ranges: [{ min: 1 }] }, unset: "unset" },
    { field: "activeDeadlineSeconds", restriction: { ranges: [{ min: 1 }] }, unset: "unset" },
    { field: "automountServiceAccountToken", restriction: { require: false }, unset: "unset" },
    { field: "runtimeClassName", restriction: { allowed: ["gvisor"] }, unset: "unset" },
    { field: "hostUsers", restriction: { require: false }, unset: "unset" },
  ];
  for (const t of pointers) {
    it(`${t.field} is a pointer: unset is denied as unset, and allowNil admits it`, () => {
      const strict = policy({ spec: { [t.field]: t.restriction } });
      const out = findings(strict, { containers: [app] });
      assert.equal(out.length, 1, JSON.stringify(out));
      assert.equal(out[0]!.field, `spec.${t.field}`);
      assert.ok(out[0]!.message.includes(t.unset), out[0]!.message);
      const lenient = policy({ spec: { [t.field]: { ...t.restriction, allowNil: true } } });
      assert.deepEqual(findings(lenient, { containers: [app] }), []);
    });
  }

  const values: Array<{ field: string; allowed: string }> = [
    { field: "restartPolicy", allowed: "Always" },
    { field: "dnsPolicy", allowed: "ClusterFirst" },
    { field: "serviceAccountName", allowed: "app" },
    { field: "priorityClassName", allowed: "low" },
  ];
  for (const t of values) {
    it(`${t.field} is not a pointer: unset reads as "", and nil rules are a load error`, () => {
      const strict = policy({ spec: { [t.field]: { allowed: [t.allowed] } } });
      assert.deepEqual(fieldsOf(findings(strict, { containers: [app] })), [`spec.${t.field}: is ""; allowed: ${JSON.stringify(t.allowed)}`]);
      assert.deepEqual(findings(strict, { containers: [app], [t.field]: t.allowed }), []);
      const r = compile({ spec: { [t.field]: { allowed: [t.allowed], allowNil: true } } });
      assert.equal(r.policy, undefined);
      assert.deepEqual(
        r.issues.map((i) => [i.path.join("."), i.message.includes("not a pointer in the Pod API")]),
        [[`spec.spec.${t.field}.allowNil`, true]],
      );
    });
  }

  it("os is a pointer: allowNil admits a pod without os, and its name is still checked when set", () => {
    const p = policy({ spec: { os: { allowNil: true, name: { allowed: ["linux"] } } } });
    assert.deepEqual(findings(p, { containers: [app] }), []);
    assert.deepEqual(findings(p, { containers: [app], os: { name: "linux" } }), []);
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], os: { name: "windows" } })), ['spec.os.name: is "windows"; allowed: "linux"']);
  });
});

describe("OCI image volumes and the containers' image restrictions", () => {
  const trusted = { registry: { allowed: ["registry.example.com"] } };
  const imageVolume = (reference: unknown) => ({ name: "data", image: { reference } });

  it("an image volume from an untrusted registry is denied, naming the volume's reference", () => {
    const p = policy({ spec: { containers: { image: trusted } } });
    const out = findings(p, { containers: [app], volumes: [{ name: "cfg", configMap: { name: "c" } }, imageVolume("evil.example.org/tools:1")] });
    assert.deepEqual(fieldsOf(out), ['spec.volumes[1].image.reference (registry): is "evil.example.org"; allowed: "registry.example.com"']);
  });

  it("an image volume from the trusted registry, other volume types and a null image are admitted", () => {
    const p = policy({ spec: { containers: { image: trusted } } });
    assert.deepEqual(
      findings(p, {
        containers: [app],
        volumes: [imageVolume("registry.example.com/data:1"), { name: "cfg", configMap: { name: "c" } }, { name: "n", image: null }, "not-a-volume"],
      }),
      [],
    );
  });

  it("an image volume without a reference is denied: it has no image to trust", () => {
    const p = policy({ spec: { containers: { image: trusted } } });
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], volumes: [{ name: "data", image: {} }] })), ["spec.volumes[0].image.reference: has no image"]);
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], volumes: [{ name: "data", image: "x" }] })), ["spec.volumes[0].image.reference: has no image"]);
  });

  it("the image volume may match any of the containers alternatives", () => {
    const p = policy({ spec: { containers: [{ image: trusted }, { image: { registry: { allowed: ["mirror.example.com"] } } }] } });
    assert.deepEqual(findings(p, { containers: [app], volumes: [imageVolume("mirror.example.com/data:1")] }), []);
    const out = findings(p, { containers: [app], volumes: [imageVolume("evil.example.org/data:1")] });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.volumes[0].image.reference (registry)", "spec.volumes[0].image.reference (registry)"],
    );
  });

  it("a containers alternative that leaves the image unrestricted leaves image volumes unrestricted too", () => {
    const p = policy({ spec: { containers: [{ image: trusted }, { name: { allowed: ["debug"] } }] } });
    assert.deepEqual(findings(p, { containers: [app], volumes: [imageVolume("evil.example.org/data:1")] }), []);
    const noImage = policy({ spec: { containers: { name: { allowed: ["app"] } } } });
    assert.deepEqual(findings(noImage, { containers: [app], volumes: [imageVolume("evil.example.org/data:1")] }), []);
  });

  it("an empty containers list restricts no image volume", () => {
    const p = policy({ spec: { containers: [] } });
    assert.deepEqual(findings(p, { containers: [app], volumes: [imageVolume("evil.example.org/data:1")] }), []);
  });

  it("when volumes restrict image.reference themselves, only their restriction applies to image volumes", () => {
    for (const volumes of [
      { image: { reference: { registry: { allowed: ["data.example.com"] } } } },
      [{ volumeType: { allowed: ["configMap"] } }, { image: { reference: { registry: { allowed: ["data.example.com"] } } } }],
    ]) {
      const p = policy({ spec: { containers: { image: trusted }, volumes } });
      assert.deepEqual(findings(p, { containers: [app], volumes: [imageVolume("data.example.com/set:1")] }), [], JSON.stringify(volumes));
      const out = findings(p, { containers: [app], volumes: [imageVolume("registry.example.com/set:1")] });
      assert.ok(out.length > 0, JSON.stringify(volumes));
      assert.ok(
        out.every((f) => f.rule.startsWith("spec.spec.volumes")),
        JSON.stringify(out),
      );
    }
  });

  it("volumes that restrict something else leave image volumes to the containers' image restrictions", () => {
    const p = policy({ spec: { containers: { image: trusted }, volumes: { image: { pullPolicy: { allowed: ["IfNotPresent", ""] } } } } });
    const out = findings(p, { containers: [app], volumes: [imageVolume("evil.example.org/data:1")] });
    assert.deepEqual(fieldsOf(out), ['spec.volumes[0].image.reference (registry): is "evil.example.org"; allowed: "registry.example.com"']);
    assert.ok(out[0]!.rule.startsWith("spec.spec.containers"), out[0]!.rule);
  });
});

describe("container lists", () => {
  it("a null container list is treated as absent, and a non-list one is denied", () => {
    const p = policy({ spec: { containers: { name: { allowed: ["app"] } } } });
    assert.deepEqual(findings(p, { containers: [app], initContainers: null }), []);
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], initContainers: "app" })), ['spec.initContainers: must be a list, got "app"']);
  });

  it("a policy that restricts no container list still judges pod fields", () => {
    const p = policy({ spec: { restartPolicy: { allowed: ["Always"] } } });
    assert.deepEqual(findings(p, { containers: [app], restartPolicy: "Always" }), []);
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], restartPolicy: "Never" })), ['spec.restartPolicy: is "Never"; allowed: "Always"']);
  });
});

describe("pods of which only the containers are judged", () => {
  it("pod fields and image volumes are not judged, the containers are", () => {
    const p = policy({
      spec: { restartPolicy: { allowed: ["Always"] }, containers: { image: { registry: { allowed: ["registry.example.com"] } } } },
    });
    const spec = { restartPolicy: "Never", containers: [app], volumes: [{ name: "data", image: { reference: "evil.example.org/x:1" } }] };
    const whole = findings(p, spec);
    assert.equal(whole.length, 2, JSON.stringify(whole));
    const onlyContainers: PodUnderReview = { ...under(spec), onlyContainers: true };
    assert.deepEqual(podRestrictionFindings(p, onlyContainers), []);
    const badContainer = { ...under({ ...spec, containers: [{ name: "x", image: "evil.example.org/x:1" }] }), onlyContainers: true };
    assert.deepEqual(
      podRestrictionFindings(p, badContainer).map((f) => f.field),
      ["spec.containers[0].image (registry)"],
    );
  });

  it("the ephemeral containers a Kubernetes 1.20 API server sends alone are named from their own list", () => {
    const p = policy({ spec: { containers: { securityContext: { privileged: { require: false } } } } });
    const plan = subjectOfRequest({
      uid: "1",
      operation: "UPDATE",
      resource: { group: "", version: "v1", resource: "pods" },
      subResource: "ephemeralcontainers",
      kind: { group: "", version: "v1", kind: "EphemeralContainers" },
      object: {
        kind: "EphemeralContainers",
        metadata: { name: "web" },
        ephemeralContainers: [{ name: "debug", image: "busybox", securityContext: { privileged: true } }],
      },
    });
    assert.ok(plan.review);
    assert.deepEqual(fieldsOf(podRestrictionFindings(p, plan.subject.pods[0]!)), ["ephemeralContainers[0].securityContext.privileged: is true; must be false"]);
  });
});

describe("load errors", () => {
  it("a pod spec restriction that is not a mapping is a load error, not a crash", () => {
    assert.deepEqual(
      compile({ spec: 5 }).issues.map((i) => `${i.path.join(".")}: ${i.message}`),
      ["spec.spec: must be a mapping, got 5"],
    );
  });
});
