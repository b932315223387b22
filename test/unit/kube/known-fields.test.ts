// Unknown Pod fields found with the generated field lists (src/kube/pod-fields.generated.json), and that file
// current with the Kubernetes API models it is generated from (scripts/generate-pod-fields.ts).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import type { SubjectPod } from "../../../src/core/admission-subject.ts";
import { unknownPodFields } from "../../../src/kube/known-fields.ts";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

function pod(spec: unknown, metadata: unknown = { name: "p" }, field = ""): SubjectPod {
  const at = (name: string) => (field ? `${field}.${name}` : name);
  return {
    metadata: { value: metadata, field: at("metadata") },
    spec: { value: spec, field: at("spec") },
    isTemplate: field !== "",
    annotations: {},
  } as SubjectPod;
}

test("the generated field lists are those of the Kubernetes API models (generate-pod-fields --check)", () => {
  const run = spawnSync(process.execPath, ["scripts/generate-pod-fields.ts", "--check"], { cwd: ROOT, encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
});

test("a misspelt field is found where it stands, with the type it is not part of", () => {
  const found = unknownPodFields(
    pod(
      { contianers: [], containers: [{ name: "a", image: "x", securityContext: { runAsUsr: 1 }, env: [{ name: "E", valeu: "1" }] }] },
      { name: "p", lables: {} },
      "spec.template",
    ),
  );
  assert.deepEqual(
    found.map((f) => `${f.field} (${f.model})`).sort(),
    [
      "spec.template.metadata.lables (ObjectMeta)",
      "spec.template.spec.containers[0].env[0].valeu (EnvVar)",
      "spec.template.spec.containers[0].securityContext.runAsUsr (SecurityContext)",
      "spec.template.spec.contianers (PodSpec)",
    ].sort(),
  );
});

test("fields of recent Kubernetes versions, maps and free-form values are known", () => {
  const found = unknownPodFields(
    pod({
      containers: [{ name: "a", image: "x", resizePolicy: [{ resourceName: "cpu", restartPolicy: "NotRequired" }], resources: { limits: { cpu: "1" } } }],
      schedulingGates: [{ name: "g" }],
      os: { name: "linux" },
      hostUsers: false,
      nodeSelector: { anything: "goes" },
      overhead: { cpu: "100m" },
    }),
  );
  assert.deepEqual(found, []);
});

test("an ephemeral-containers update is judged on its containers only", () => {
  const found = unknownPodFields({
    ...pod({ ephemeralContainers: [{ name: "d", image: "x", targetContainerName: "a", tty: true, tyy: 1 }], bogus: 1 }),
    onlyContainers: true,
  });
  assert.deepEqual(
    found.map((f) => f.field),
    ["spec.ephemeralContainers[0].tyy"],
  );
});
