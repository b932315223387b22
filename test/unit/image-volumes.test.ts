// OCI image volumes (`spec.volumes[].image.reference`, the ImageVolume feature) are pulled by the kubelet like
// container images, so they go everywhere container images go: the one extraction, image policies, pinning,
// PodRestrictions and `check`. Each test builds a pod whose containers are allowed and whose image volume alone
// is not: before image volumes were extracted, every one of them admitted it.
import { test } from "node:test";
import { tempFolder } from "../support/temp-folders.ts";
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { subjectOfObject, type AdmissionSubject } from "../../src/core/admission-subject.ts";
import { imagesToPin, pinningDecision } from "../../src/core/image-policy/digest-pinning.ts";
import { podImages } from "../../src/core/pod-images.ts";
import type { AdmissionCall } from "../../src/engine/admission-call.ts";
import { Engine } from "../../src/engine/engine.ts";
import { buildEngine } from "../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { profileSources, shippedProfiles } from "../../src/policy/profiles.ts";
import { imprimatur } from "../support/cli-process.ts";
import { validateSubject } from "../support/engine-review.ts";

const POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"], digestMutate: true}]
  default: deny
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: volume-sources}
spec:
  spec:
    volumes:
      - image:
          reference: [{registry: {allowed: [registry.example.com]}, repository: {allowed: [models/*]}}]
`;

const safeContainers = [{ name: "app", image: "registry.example.com/team/app:1.0" }];

function pod(volumes: object[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: "v1", kind: "Pod", metadata: { name: "web", namespace: "shop" }, spec: { containers: safeContainers, volumes, ...extra } };
}

const modelVolume = (reference: unknown) => ({ name: "model", image: { reference, pullPolicy: "IfNotPresent" } });

async function engine(): Promise<Engine> {
  const parsed = parsePolicyText(POLICIES, "inline.yaml", { profiles: profileSources(await shippedProfiles()) });
  assert.deepEqual(parsed.errors, []);
  return buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
}

const call: AdmissionCall = { endpoint: "check", deadline: Date.now() + 60_000, dryRun: true };

function subject(obj: Record<string, unknown>): AdmissionSubject {
  const plan = subjectOfObject(obj);
  assert.ok(plan.review, plan.review ? "" : plan.why);
  return plan.subject;
}

test("the one extraction lists image volumes after the containers, with the field path of the reference", () => {
  const spec = {
    containers: [{ name: "a", image: "app:1" }],
    initContainers: [{ name: "i", image: "init:1" }],
    volumes: [{ name: "cfg", configMap: { name: "c" } }, modelVolume("models/llm:7b"), { name: "broken", image: {} }, { name: "n", image: null }],
  };
  assert.deepEqual(podImages(spec), [
    { image: "app:1", field: "spec.containers[0].image" },
    { image: "init:1", field: "spec.initContainers[0].image" },
    { image: "models/llm:7b", field: "spec.volumes[1].image.reference" },
    // An image volume without a reference is reviewed as "", which every policy denies as an invalid reference.
    { image: "", field: "spec.volumes[2].image.reference" },
  ]);
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" }, spec: { template: { spec } } };
  assert.deepEqual(
    subject(deployment).images.map((i) => i.field),
    [
      "spec.template.spec.containers[0].image",
      "spec.template.spec.initContainers[0].image",
      "spec.template.spec.volumes[1].image.reference",
      "spec.template.spec.volumes[2].image.reference",
    ],
  );
});

test("an image policy denies a pod whose only disallowed image is an image volume, naming the volume's field", async () => {
  const e = await engine();
  const denied = await validateSubject(e, subject(pod([modelVolume("docker.io/evil/miner:1")])), call);
  assert.equal(denied.allowed, false);
  assert.deepEqual(
    denied.violations.map((v) => [v.kind ?? "ImagePolicy", v.policy, v.field, v.image]),
    [
      ["ImagePolicy", "trusted", "spec.volumes[0].image.reference", "docker.io/evil/miner:1"],
      ["PodRestriction", "volume-sources", "spec.volumes[0].image.reference (registry)", undefined],
      ["PodRestriction", "volume-sources", "spec.volumes[0].image.reference (repository)", undefined],
    ],
  );
  const admitted = await validateSubject(e, subject(pod([modelVolume("registry.example.com/models/llm:7b")])), call);
  assert.equal(admitted.allowed, true, JSON.stringify(admitted.violations));
  const noReference = await validateSubject(e, subject(pod([{ name: "model", image: {} }])), call);
  assert.equal(noReference.allowed, false);
  assert.equal(noReference.violations[0]!.rule, "imageReference");
  await e.close();
});

test("a workload template's image volume is judged as the pod's would be", async () => {
  const e = await engine();
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "shop" },
    spec: { template: { spec: { containers: safeContainers, volumes: [modelVolume("quay.io/x/y:1")] } } },
  };
  const d = await validateSubject(e, subject(deployment), call);
  assert.equal(d.allowed, false);
  assert.ok(d.violations.some((v) => v.field === "spec.template.spec.volumes[0].image.reference" && v.policy === "trusted"));
  await e.close();
});

test("/mutate's pinning rewrites an image volume's reference in place and records it on the pod", () => {
  const parsed = parsePolicyText(POLICIES, "inline.yaml");
  const s = subject(pod([modelVolume("registry.example.com/models/llm:7b")]));
  const targets = imagesToPin(parsed.policies.ImagePolicy, s.namespace, s.images, {});
  assert.deepEqual(
    targets.map((t) => t.field),
    ["spec.containers[0].image", "spec.volumes[0].image.reference"],
  );
  const digest = `sha256:${"a".repeat(64)}`;
  const outcome = pinningDecision(
    targets,
    targets.map(() => ({ ok: true, digest, credentialSource: "anonymous" })),
    s.pods.map((p) => p.pinRecord),
    { mode: "mutate", failOpen: false },
  );
  assert.deepEqual(outcome.decision.patches?.[1], {
    op: "replace",
    path: "/spec/volumes/0/image/reference",
    value: `registry.example.com/models/llm:7b@${digest}`,
  });
  assert.match(JSON.stringify(outcome.decision.patches?.[2]?.value), /models\/llm:7b@sha256/);
});

test("check denies a manifest whose image volume is disallowed, with the field", async () => {
  const dir = await tempFolder("imprimatur-image-volumes-");
  await writeFile(join(dir, "policies.yaml"), POLICIES);
  await writeFile(join(dir, "pod.json"), JSON.stringify(pod([modelVolume("docker.io/evil/miner:1")])));
  const r = await imprimatur(["check", "--policies", join(dir, "policies.yaml"), "-f", join(dir, "pod.json")]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /image "docker\.io\/evil\/miner:1" \(spec\.volumes\[0\]\.image\.reference\) denied by policy trusted default/);
});

test("a PodRestriction's container image restriction also holds image volumes, unless volumes restrict image.reference", async () => {
  const policies = (volumes: string) => `
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: own-registry}
spec:
  spec:
    containers: [{image: {registry: {allowed: [registry.example.com]}}}]
${volumes}`;
  const judge = async (text: string, obj: Record<string, unknown>) => {
    const parsed = parsePolicyText(text, "inline.yaml");
    assert.deepEqual(parsed.errors, []);
    const e = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
    const d = await validateSubject(e, subject(obj), call);
    await e.close();
    return d;
  };
  const denied = await judge(policies(""), pod([modelVolume("docker.io/evil/miner:1")]));
  assert.equal(denied.allowed, false);
  assert.deepEqual(
    denied.violations.map((v) => [v.policy, v.field, v.rule]),
    [["own-registry", "spec.volumes[0].image.reference (registry)", "spec.spec.containers[0].image.registry"]],
  );
  assert.equal((await judge(policies(""), pod([modelVolume("registry.example.com/models/llm:7b")]))).allowed, true);
  // The volumes' own restriction replaces the containers' for image volumes.
  const own = policies("    volumes: [{image: {reference: {registry: {allowed: [quay.io]}}}}]");
  assert.equal((await judge(own, pod([modelVolume("quay.io/models/llm:7b")]))).allowed, true);
  assert.equal((await judge(own, pod([modelVolume("registry.example.com/models/llm:7b")]))).allowed, false);
});

test("podImages: entries that are not objects, and images that are not strings, are reviewed as an empty image", () => {
  assert.deepEqual(podImages(undefined), []);
  assert.deepEqual(podImages({ containers: [null, "nginx", { image: 5 }], volumes: [null, { image: null }, { image: { reference: 5 } }] }), [
    { image: "", field: "spec.containers[0].image" },
    { image: "", field: "spec.containers[1].image" },
    { image: "", field: "spec.containers[2].image" },
    { image: "", field: "spec.volumes[2].image.reference" },
  ]);
});
