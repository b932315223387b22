// PSA's wording, case by case: who is named (only the pod and the containers that set a bad value), what is
// named (only the bad values, each once, sorted), and the singular or plural of each noun. The expected strings
// follow Pod Security Admission's policy/check_<ID>.go: the ForbiddenDetail of each check, built from the pod.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { bindProfileClusterWide, shippedProfiles, type Profile } from "../../../src/policy/profiles.ts";
import { podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";
import { forbiddenDetail, psaCheckOf, psaCheckResults, type PsaCheckResult } from "../../../src/core/pod-security/psa-messages.ts";

let profiles: Map<string, Profile>;
before(async () => {
  profiles = await shippedProfiles();
});

type Json = Record<string, unknown>;

function wordingOf(name: string, pod: PodUnderReview): string {
  return forbiddenDetail(psaCheckResults(pod, podRestrictionFindings(bindProfileClusterWide(name, profiles), pod)));
}

/** PSA's ForbiddenDetail of the profile `name` ("restricted", "baseline@v1.18") on a Pod. */
function detailOf(name: string, spec: Json, metadata: Json = {}): string {
  const [pod] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "pod", ...metadata }, spec });
  return wordingOf(name, pod!);
}

const ok = { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } };
/** A pod that restricted admits, with these containers (each given `ok` under its own securityContext). */
function restrictedPod(
  containers: Json[],
  podSecurityContext: Json = { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
  extra: Json = {},
): Json {
  return {
    securityContext: podSecurityContext,
    containers: containers.map((c) => ({ image: "app:1", ...c, securityContext: { ...ok, ...(c.securityContext as Json | undefined) } })),
    ...extra,
  };
}

test("hostNamespaces names only the namespaces the pod shares", () => {
  assert.equal(detailOf("baseline", { hostNetwork: true, hostPID: false, containers: [{ name: "a", image: "a" }] }), "host namespaces (hostNetwork)");
});

test("hostPathVolumes: one volume is singular; a volume without a string name is PSA's empty name", () => {
  assert.equal(
    detailOf("baseline", { containers: [{ name: "a", image: "a" }], volumes: [{ name: "h", hostPath: { path: "/" } }] }),
    'hostPath volumes (volume "h")',
  );
  assert.equal(detailOf("baseline", { containers: [{ name: "a", image: "a" }], volumes: [{ hostPath: { path: "/" } }] }), 'hostPath volumes (volume "")');
  assert.equal(
    detailOf("baseline", { containers: [{ name: "a", image: "a" }], volumes: [{ name: 7, hostPath: { path: "/" } }] }),
    'hostPath volumes (volume "")',
  );
});

test("a container without a name, or with a name that is not a string, is PSA's empty name", () => {
  const privileged = { securityContext: { privileged: true } };
  assert.equal(detailOf("baseline", { containers: [{ image: "a", ...privileged }] }), 'privileged (container "" must not set securityContext.privileged=true)');
  assert.equal(
    detailOf("baseline", { containers: [{ name: 7, image: "a", ...privileged }] }),
    'privileged (container "" must not set securityContext.privileged=true)',
  );
});

test("hostPorts: only containers with a non-zero hostPort are named", () => {
  const spec = {
    containers: [
      { name: "zero", image: "z", ports: [{ containerPort: 1, hostPort: 0 }] },
      {
        name: "a",
        image: "a",
        ports: [
          { containerPort: 1, hostPort: 0 },
          { containerPort: 2, hostPort: 8080 },
        ],
      },
      { name: "none", image: "n" },
      { name: "plain", image: "p", ports: [{ containerPort: 3 }] },
    ],
  };
  assert.equal(detailOf("baseline", spec), 'hostPort (container "a" uses hostPort 8080)');
});

test("hostProbesAndHostLifecycle: one container and one host are singular; an empty host is no host", () => {
  const spec = {
    containers: [
      { name: "a", image: "a", readinessProbe: { httpGet: { port: 80, host: "h.example" } } },
      { name: "b", image: "b", startupProbe: { tcpSocket: { port: 80, host: "" } }, lifecycle: { postStart: { httpGet: { port: 80, host: "" } } } },
    ],
  };
  assert.equal(detailOf("baseline", spec), 'probe or lifecycle host (container "a" uses probe or lifecycle host "h.example")');
});

test("capabilities_baseline: containers that add nothing, or only default capabilities, are not named", () => {
  const spec = {
    containers: [
      { name: "a", image: "a", securityContext: { capabilities: { add: ["SYS_ADMIN"] } } },
      { name: "drops", image: "b", securityContext: { capabilities: { drop: ["ALL"] } } },
      { name: "default", image: "c", securityContext: { capabilities: { add: ["CHOWN", "KILL"] } } },
    ],
  };
  assert.equal(detailOf("baseline", spec), 'non-default capabilities (container "a" must not include "SYS_ADMIN" in securityContext.capabilities.add)');
});

test("capabilities_restricted: dropping ALL and adding nothing else is fine; NET_BIND_SERVICE may be added", () => {
  const spec = restrictedPod([
    { name: "a", securityContext: { capabilities: { drop: ["ALL"], add: ["SYS_ADMIN"] } } },
    { name: "b" },
    { name: "c", securityContext: { capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] } } },
  ]);
  assert.equal(detailOf("restricted", spec), 'unrestricted capabilities (container "a" must not include "SYS_ADMIN" in securityContext.capabilities.add)');
});

test("appArmorProfile: allowed types and other annotations are not named; the annotations sorted after the types", () => {
  const spec = {
    securityContext: { appArmorProfile: { type: "Unconfined" } },
    containers: [
      { name: "local", image: "a", securityContext: { appArmorProfile: { type: "Localhost", localhostProfile: "p" } } },
      { name: "default", image: "a", securityContext: { appArmorProfile: { type: "RuntimeDefault" } } },
      { name: "c", image: "a", securityContext: { appArmorProfile: { type: "Unconfined" } } },
    ],
  };
  const annotations = {
    "container.apparmor.security.beta.kubernetes.io/z": "unconfined",
    note: "unconfined",
    "container.apparmor.security.beta.kubernetes.io/y": "unknown",
  };
  assert.equal(
    detailOf("baseline", spec, { annotations }),
    'forbidden AppArmor profiles (pod and container "c" and annotations must not set AppArmor profile type to "Unconfined", ' +
      '"container.apparmor.security.beta.kubernetes.io/y="unknown"", "container.apparmor.security.beta.kubernetes.io/z="unconfined"")',
  );
  assert.equal(
    detailOf("baseline", { containers: [{ name: "a", image: "a" }] }, { annotations: { "container.apparmor.security.beta.kubernetes.io/a": "unconfined" } }),
    'forbidden AppArmor profile (annotation must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/a="unconfined"")',
  );
});

test("appArmorProfile: a profile without a type has PSA's empty type", () => {
  assert.equal(
    detailOf("baseline", { securityContext: { appArmorProfile: {} }, containers: [{ name: "a", image: "a", securityContext: { appArmorProfile: {} } }] }),
    'forbidden AppArmor profile (pod and container "a" must not set AppArmor profile type to "")',
  );
});

test("seccompProfile_baseline: only the pod or containers with a bad type are named, with their own values", () => {
  assert.equal(
    detailOf("baseline", {
      containers: [
        { name: "default", image: "a", securityContext: { seccompProfile: { type: "RuntimeDefault" } } },
        { name: "b", image: "a", securityContext: { seccompProfile: { type: "Unconfined" } } },
        { name: "unset", image: "a" },
      ],
    }),
    'seccompProfile (container "b" must not set securityContext.seccompProfile.type to "Unconfined")',
  );
  assert.equal(
    detailOf("baseline", {
      securityContext: { seccompProfile: { type: "Unconfined" } },
      containers: [{ name: "a", image: "a", securityContext: { seccompProfile: { type: "Localhost", localhostProfile: "p" } } }],
    }),
    'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
  );
  // A profile without a type is not RuntimeDefault or Localhost either: PSA names it with its empty type.
  assert.equal(
    detailOf("baseline", {
      securityContext: { seccompProfile: {} },
      containers: [
        { name: "a", image: "a", securityContext: { seccompProfile: { type: "Unconfined" } } },
        { name: "b", image: "a", securityContext: { seccompProfile: {} } },
      ],
    }),
    'seccompProfile (pod and containers "a", "b" must not set securityContext.seccompProfile.type to "", "Unconfined")',
  );
  // Before v1.19, the annotations: two are plural, sorted and joined with ", ".
  assert.equal(
    detailOf(
      "baseline@v1.18",
      { containers: [{ name: "a", image: "a" }] },
      { annotations: { "seccomp.security.alpha.kubernetes.io/pod": "unconfined", "container.seccomp.security.alpha.kubernetes.io/a": "unconfined" } },
    ),
    'seccompProfile (forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", seccomp.security.alpha.kubernetes.io/pod="unconfined")',
  );
});

test("seccompProfile_restricted: the pod's own bad value, a profile without a type, and pod and container together", () => {
  assert.equal(
    detailOf(
      "restricted",
      restrictedPod([{ name: "a", securityContext: { seccompProfile: { type: "RuntimeDefault" } } }], {
        runAsNonRoot: true,
        seccompProfile: { type: "Unconfined" },
      }),
    ),
    'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
  );
  assert.equal(
    detailOf("restricted", restrictedPod([{ name: "a", securityContext: { seccompProfile: {} } }], { runAsNonRoot: true, seccompProfile: {} })),
    'seccompProfile (pod and container "a" must not set securityContext.seccompProfile.type to "")',
  );
});

test("windowsHostProcess and runAsUser: a container alone is named when the pod is fine", () => {
  assert.equal(
    detailOf("baseline", {
      securityContext: { windowsOptions: { hostProcess: false } },
      containers: [
        { name: "a", image: "a", securityContext: { windowsOptions: { hostProcess: true } } },
        { name: "b", image: "b", securityContext: { windowsOptions: { hostProcess: false } } },
      ],
    }),
    'hostProcess (container "a" must not set securityContext.windowsOptions.hostProcess=true)',
  );
  assert.equal(
    detailOf(
      "restricted",
      restrictedPod(
        [
          { name: "a", securityContext: { runAsUser: 0 } },
          { name: "b", securityContext: { runAsUser: 1000 } },
        ],
        {
          runAsNonRoot: true,
          runAsUser: 1000,
          seccompProfile: { type: "RuntimeDefault" },
        },
      ),
    ),
    'runAsUser=0 (container "a" must not set runAsUser=0)',
  );
});

test("procMount: Default, unset and null are fine (null is unset, as in Kubernetes)", () => {
  const spec = {
    containers: [
      { name: "default", image: "a", securityContext: { procMount: "Default" } },
      { name: "unset", image: "a", securityContext: {} },
      { name: "null", image: "a", securityContext: { procMount: null } },
      { name: "c", image: "a", securityContext: { procMount: "Unmasked" } },
    ],
  };
  assert.equal(detailOf("baseline", spec), 'procMount (container "c" must not set securityContext.procMount to "Unmasked")');
});

test("restrictedVolumes: every volume type PSA names, past the tenth volume, and any other as unknown", () => {
  const types = [
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "hostPath",
  ];
  const volumes = [{ name: "fine", emptyDir: {} }, ...types.map((t, i) => ({ name: `v${i}`, [t]: {} })), { name: "odd", someFutureSource: {} }];
  assert.equal(
    detailOf("restricted", restrictedPod([{ name: "a" }], undefined, { volumes })),
    `restricted volume types (volumes ${[...types.map((_, i) => `"v${i}"`), '"odd"'].join(", ")} use restricted volume types ` +
      `${[...types, "unknown"]
        .sort()
        .map((t) => `"${t}"`)
        .join(", ")})`,
  );
});

test("seLinuxOptions: the eleventh container is found", () => {
  const containers = Array.from({ length: 11 }, (_, i) => ({ name: `c${i}`, image: "a" }));
  containers[10] = { ...containers[10]!, securityContext: { seLinuxOptions: { type: "bad_t" } } } as (typeof containers)[number];
  assert.equal(detailOf("baseline", { containers }), 'seLinuxOptions (container "c10" set forbidden securityContext.seLinuxOptions: type "bad_t")');
});

// Pods that no apiserver would accept, as `check` reads them from files or a caller posts them: each check still
// names who and what its findings are about.

/** The result of `check` of the profile `name` on a Pod (undefined when the pod passes it). */
function resultOf(name: string, check: string, spec: Json, metadata: Json = {}): PsaCheckResult | undefined {
  const [pod] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "pod", ...metadata }, spec });
  return psaCheckResults(pod!, podRestrictionFindings(bindProfileClusterWide(name, profiles), pod!)).find((r) => r.check === check);
}

test("restrictedVolumes: a volume that is not an object, and one whose source key looks like a container, are named as volumes", () => {
  const volumes = [{ name: "v", nfs: {} }, "not a volume", { name: "w", "containers[0]": {} }];
  assert.deepEqual(resultOf("restricted", "restrictedVolumes", restrictedPod([{ name: "a" }], undefined, { volumes })), {
    check: "restrictedVolumes",
    reason: "restricted volume types",
    detail: 'volumes "v", "", "w" use restricted volume types "nfs", "unknown"',
  });
});

test("seLinuxOptions that are not an object name the pod or container that sets them", () => {
  assert.equal(
    detailOf("baseline", { securityContext: { seLinuxOptions: "spc_t" }, containers: [{ name: "a", image: "a", securityContext: { seLinuxOptions: 5 } }] }),
    'seLinuxOptions (pod and container "a" set forbidden securityContext.seLinuxOptions: )',
  );
});

test("seccompProfile_baseline: before v1.19 an annotation that is null has PSA's empty value", () => {
  assert.equal(
    detailOf(
      "baseline@v1.18",
      { containers: [{ name: "a", image: "a" }] },
      { annotations: { "seccomp.security.alpha.kubernetes.io/pod": "unconfined", "container.seccomp.security.alpha.kubernetes.io/a": null } },
    ),
    'seccompProfile (forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="", seccomp.security.alpha.kubernetes.io/pod="unconfined")',
  );
});

test("sysctls: an entry without a name is named by PSA's empty name", () => {
  assert.equal(
    detailOf("baseline", { securityContext: { sysctls: [{ value: "1" }, { name: "kernel.msgmax", value: "1" }] }, containers: [{ name: "a", image: "a" }] }),
    "forbidden sysctls (, kernel.msgmax)",
  );
});

test("a pod whose fields sit at the object's root (no spec. or metadata. prefix) is worded the same", () => {
  const pod: PodUnderReview = {
    metadata: { value: { name: "p", annotations: { "seccomp.security.alpha.kubernetes.io/pod": "unconfined" } }, field: "" },
    spec: { value: { containers: [{ name: "a", image: "a", securityContext: { seLinuxOptions: { type: "bad_t" } } }] }, field: "" },
    isTemplate: true,
  };
  assert.equal(
    wordingOf("baseline@v1.18", pod),
    'seLinuxOptions (container "a" set forbidden securityContext.seLinuxOptions: type "bad_t"), ' +
      'seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined")',
  );
});

// A check whose finding the pod does not show (a finding handed in by a caller, not computed from this pod) keeps
// PSA's reason alone: never a detail naming nobody.
const REASONS: Array<[rule: string, check: string, reason: string]> = [
  ["baseline/appArmorProfile", "appArmorProfile", "forbidden AppArmor profile"],
  ["baseline/capabilities_baseline", "capabilities_baseline", "non-default capabilities"],
  ["baseline/hostNamespaces", "hostNamespaces", "host namespaces"],
  ["baseline/hostPathVolumes", "hostPathVolumes", "hostPath volumes"],
  ["baseline/hostPorts", "hostPorts", "hostPort"],
  ["baseline/hostProbesAndHostLifecycle", "hostProbesAndHostLifecycle", "probe or lifecycle host"],
  ["baseline/privileged", "privileged", "privileged"],
  ["baseline/procMount", "procMount", "procMount"],
  ["baseline/seLinuxOptions", "seLinuxOptions", "seLinuxOptions"],
  ["baseline/seccompProfile_baseline", "seccompProfile_baseline", "seccompProfile"],
  ["baseline/sysctls", "sysctls", "forbidden sysctls"],
  ["baseline/windowsHostProcess", "windowsHostProcess", "hostProcess"],
  ["restricted/allowPrivilegeEscalation", "allowPrivilegeEscalation", "allowPrivilegeEscalation != false"],
  ["restricted/capabilities_restricted", "capabilities_restricted", "unrestricted capabilities"],
  ["restricted/procMount", "procMount", "procMount"],
  ["restricted/restrictedVolumes", "restrictedVolumes", "restricted volume types"],
  ["restricted/runAsNonRoot", "runAsNonRoot", "runAsNonRoot != true"],
  ["restricted/runAsUser", "runAsUser", "runAsUser=0"],
  ["restricted/seccompProfile_restricted", "seccompProfile_restricted", "seccompProfile"],
];

test("a check the pod does not show keeps PSA's reason alone, under PSA's check ID", () => {
  // Fine for restricted; containers without their own runAsNonRoot or seccompProfile rely on the pod's.
  const [pod] = podsInObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p" },
    spec: restrictedPod([{ name: "a" }, { name: "b", securityContext: { procMount: "Default" } }], {
      runAsNonRoot: true,
      seccompProfile: { type: "Localhost", localhostProfile: "p" },
    }),
  });
  for (const [rule, check, reason] of REASONS) {
    const finding = { field: "spec.containers[0].securityContext.privileged", rule, message: "handed in" };
    assert.deepEqual(psaCheckResults(pod!, [finding]), [{ check, reason, detail: "" }], rule);
  }
});

test("rules of other policies are kept once each, even where their policy is named like a PSA level", () => {
  const [pod] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [{ name: "a", image: "a" }] } });
  const mine = { field: "spec.containers[0].image", rule: "baseline/no-latest-tags", message: "x" };
  assert.equal(psaCheckOf(mine.rule), undefined);
  assert.deepEqual(psaCheckResults(pod!, [mine, { ...mine, field: "spec.containers[0].name" }]), [
    { check: "baseline/no-latest-tags", reason: "baseline/no-latest-tags", detail: "" },
  ]);
});
