// PSA's wording of the shipped profiles' findings. Each expected string is Pod Security Admission's, from
// k8s.io/pod-security-admission policy/check_<ID>.go (ForbiddenReason and ForbiddenDetail) and their tests
// (check_<ID>_test.go); the joining of reasons and the order of the checks from policy/checks.go
// (AggregateCheckResult.ForbiddenDetail) and policy/registry.go (baseline check IDs sorted, then restricted ones).
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { bindProfileClusterWide, policyMinors, shippedProfiles, type Profile } from "../../../src/policy/profiles.ts";
import { podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";
import { readKubeYaml } from "../../../src/config/kube-yaml.ts";
import { forbiddenDetail, psaCheckOf, psaCheckResults, violatesMessage, WORDED_CHECKS } from "../../../src/core/pod-security/psa-messages.ts";

let profiles: Map<string, Profile>;
before(async () => {
  profiles = await shippedProfiles();
});

type Json = Record<string, unknown>;

/** PSA's ForbiddenDetail of the profile `name` ("restricted", "baseline@v1.18") on a Pod. */
function detailOf(name: string, spec: Json, metadata: Json = {}): string {
  const policy = bindProfileClusterWide(name, profiles);
  const [pod] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "pod", ...metadata }, spec });
  return forbiddenDetail(psaCheckResults(pod!, podRestrictionFindings(policy, pod!)));
}

// A pod that restricted admits; each case below breaks one thing.
const ok = { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } };
function restrictedPod(extra: Json = {}, containers: Json[] = [{ name: "app", image: "app:1", securityContext: ok }]): Json {
  return { securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } }, containers, ...extra };
}

test("every check of the shipped baseline and restricted profiles has PSA's wording", () => {
  for (const level of ["baseline", "restricted", "baseline@v1.0", "restricted@v1.22"]) {
    for (const check of bindProfileClusterWide(level, profiles).checks) {
      const id = psaCheckOf(check.name ?? "");
      assert.ok(id, `${level}: ${check.name}`);
      assert.ok(WORDED_CHECKS.includes(id.id), `${level}: ${check.name}`);
    }
  }
});

test("privileged", () => {
  const c = { name: "a", image: "a", securityContext: { ...ok, privileged: true } };
  assert.equal(detailOf("baseline", { containers: [c, { ...c, name: "b" }] }), 'privileged (containers "a", "b" must not set securityContext.privileged=true)');
});

test("hostNamespaces: the namespaces sorted", () => {
  assert.equal(
    detailOf("baseline", { hostPID: true, hostNetwork: true, hostIPC: true, containers: [{ name: "a", image: "a" }] }),
    "host namespaces (hostIPC, hostNetwork, hostPID)",
  );
});

test("hostPathVolumes (baseline) and restrictedVolumes (restricted, which replaces it)", () => {
  const spec = {
    containers: [{ name: "a", image: "a" }],
    volumes: [
      { name: "h", hostPath: { path: "/" } },
      { name: "ok", emptyDir: {} },
      { name: "n", nfs: { server: "s", path: "/" } },
      { name: "h2", hostPath: { path: "/x" } },
    ],
  };
  assert.equal(detailOf("baseline", spec), 'hostPath volumes (volumes "h", "h2")');
  assert.equal(
    detailOf("restricted", restrictedPod({ volumes: spec.volumes })),
    'restricted volume types (volumes "h", "n", "h2" use restricted volume types "hostPath", "nfs")',
  );
  assert.equal(
    detailOf("restricted", restrictedPod({ volumes: [{ name: "h", hostPath: { path: "/" } }] })),
    'restricted volume types (volume "h" uses restricted volume type "hostPath")',
  );
});

test("hostPorts: the ports as sorted strings", () => {
  const spec = {
    initContainers: [{ name: "i", image: "i", ports: [{ containerPort: 1, hostPort: 8080 }] }],
    containers: [{ name: "a", image: "a", ports: [{ containerPort: 1, hostPort: 443 }, { containerPort: 2 }] }],
  };
  assert.equal(detailOf("baseline", spec), 'hostPort (containers "i", "a" use hostPorts 443, 8080)');
  assert.equal(detailOf("baseline", { containers: [spec.containers[0]] }), 'hostPort (container "a" uses hostPort 443)');
});

test("hostProbesAndHostLifecycle: containers and hosts sorted", () => {
  const spec = {
    containers: [
      { name: "z", image: "z", livenessProbe: { httpGet: { port: 80, host: "b.example" } } },
      { name: "a", image: "a", lifecycle: { preStop: { tcpSocket: { port: 80, host: "a.example" } } } },
    ],
  };
  assert.equal(detailOf("baseline", spec), 'probe or lifecycle host (containers "a", "z" use probe or lifecycle hosts "a.example", "b.example")');
});

test("capabilities_baseline: the capabilities sorted", () => {
  const spec = {
    containers: [
      { name: "a", image: "a", securityContext: { capabilities: { add: ["SYS_ADMIN", "CHOWN"] } } },
      { name: "b", image: "b", securityContext: { capabilities: { add: ["NET_RAW"] } } },
    ],
  };
  assert.equal(
    detailOf("baseline", spec),
    'non-default capabilities (containers "a", "b" must not include "NET_RAW", "SYS_ADMIN" in securityContext.capabilities.add)',
  );
});

test("appArmorProfile: pod, containers, annotations (PSA's check_appArmorProfile_test.go)", () => {
  assert.equal(
    detailOf("baseline", { securityContext: { appArmorProfile: { type: "Unconfined" } }, containers: [{ name: "a", image: "a" }] }),
    'forbidden AppArmor profile (pod must not set AppArmor profile type to "Unconfined")',
  );
  assert.equal(
    detailOf("baseline", {
      securityContext: { appArmorProfile: { type: "RuntimeDefault" } },
      containers: [{ name: "foo", image: "a", securityContext: { appArmorProfile: { type: "Unconfined" } } }],
    }),
    'forbidden AppArmor profile (container "foo" must not set AppArmor profile type to "Unconfined")',
  );
  const annotations = {
    "container.apparmor.security.beta.kubernetes.io/a": "",
    "container.apparmor.security.beta.kubernetes.io/b": "runtime/default",
    "container.apparmor.security.beta.kubernetes.io/d": "localhost/foo",
    "container.apparmor.security.beta.kubernetes.io/e": "unconfined",
    "container.apparmor.security.beta.kubernetes.io/f": "unknown",
  };
  assert.equal(
    detailOf("baseline", { containers: [{ name: "e", image: "e" }] }, { annotations }),
    "forbidden AppArmor profiles (annotations must not set AppArmor profile type to " +
      '"container.apparmor.security.beta.kubernetes.io/e="unconfined"", "container.apparmor.security.beta.kubernetes.io/f="unknown"")',
  );
});

test("seLinuxOptions: setters, types sorted, user and role (PSA's check_seLinuxOptions_test.go)", () => {
  const spec = {
    securityContext: { seLinuxOptions: { type: "foo", user: "bar", role: "baz" } },
    containers: [
      { name: "a", image: "a", securityContext: { seLinuxOptions: { type: "container_t" } } },
      { name: "d", image: "d", securityContext: { seLinuxOptions: { type: "bar" } } },
      { name: "e", image: "e", securityContext: { seLinuxOptions: { user: "bar" } } },
      { name: "f", image: "f", securityContext: { seLinuxOptions: { role: "baz" } } },
    ],
  };
  assert.equal(
    detailOf("baseline", spec),
    'seLinuxOptions (pod and containers "d", "e", "f" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set)',
  );
  assert.equal(
    detailOf("baseline", { securityContext: { seLinuxOptions: { user: "bad" } }, containers: [{ name: "a", image: "a" }] }),
    "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: user may not be set)",
  );
  // container_engine_t is allowed from policy version v1.31 only: the version decides, the wording stays.
  const engine = { containers: [{ name: "a", image: "a", securityContext: { seLinuxOptions: { type: "container_engine_t" } } }] };
  assert.equal(detailOf("baseline", engine), "");
  assert.equal(detailOf("baseline@v1.30", engine), 'seLinuxOptions (container "a" set forbidden securityContext.seLinuxOptions: type "container_engine_t")');
});

test("procMount: baseline, and restricted for a pod in a user namespace (v1.35+)", () => {
  const unmasked = { name: "a", image: "a", securityContext: { ...ok, procMount: "Unmasked" } };
  assert.equal(detailOf("baseline", { containers: [unmasked] }), 'procMount (container "a" must not set securityContext.procMount to "Unmasked")');
  assert.equal(detailOf("baseline", { hostUsers: false, containers: [unmasked] }), "");
  assert.equal(
    detailOf("restricted", restrictedPod({ hostUsers: false }, [unmasked])),
    'procMount (container "a" must not set securityContext.procMount to "Unmasked")',
  );
});

test("the restricted procMount check (v1.35+) sorts as PSA's procMount_restricted, among the restricted checks", () => {
  const spec = { containers: [{ name: "a", image: "a", securityContext: { procMount: "Unmasked" } }] };
  const reasons = (name: string) => detailOf(name, spec).replace(/ \([^()]*(\([^()]*\))?[^()]*\)/g, "");
  // Before v1.35 the baseline check reports it, among the baseline ones.
  assert.equal(reasons("restricted@v1.34"), "procMount, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile");
  assert.equal(reasons("restricted"), "allowPrivilegeEscalation != false, unrestricted capabilities, procMount, runAsNonRoot != true, seccompProfile");
});

test("seccompProfile_baseline: fields from v1.19, annotations before", () => {
  const spec = {
    securityContext: { seccompProfile: { type: "Unconfined" } },
    containers: [{ name: "a", image: "a", securityContext: { seccompProfile: { type: "Unconfined" } } }],
  };
  assert.equal(detailOf("baseline", spec), 'seccompProfile (pod and container "a" must not set securityContext.seccompProfile.type to "Unconfined")');
  assert.equal(
    detailOf("baseline@v1.18", { containers: [{ name: "a", image: "a" }] }, { annotations: { "seccomp.security.alpha.kubernetes.io/pod": "unconfined" } }),
    'seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined")',
  );
});

test("sysctls: the forbidden ones in the pod's order, as the version allows them", () => {
  const sysctls = [
    { name: "net.core.somaxconn", value: "1" },
    { name: "net.ipv4.tcp_syncookies", value: "1" },
    { name: "net.ipv4.ip_local_reserved_ports", value: "1" },
    { name: "kernel.msgmax", value: "1" },
  ];
  const spec = { securityContext: { sysctls }, containers: [{ name: "a", image: "a" }] };
  assert.equal(detailOf("baseline", spec), "forbidden sysctls (net.core.somaxconn, kernel.msgmax)");
  assert.equal(detailOf("baseline@v1.26", spec), "forbidden sysctls (net.core.somaxconn, net.ipv4.ip_local_reserved_ports, kernel.msgmax)");
});

test("windowsHostProcess", () => {
  const host = { windowsOptions: { hostProcess: true } };
  assert.equal(
    detailOf("baseline", {
      securityContext: host,
      containers: [
        { name: "a", image: "a", securityContext: host },
        { name: "b", image: "b", securityContext: host },
      ],
    }),
    'hostProcess (pod and containers "a", "b" must not set securityContext.windowsOptions.hostProcess=true)',
  );
});

test("allowPrivilegeEscalation", () => {
  const c = (name: string, sc: Json) => ({ name, image: name, securityContext: sc });
  assert.equal(
    detailOf("restricted", restrictedPod({}, [c("a", { capabilities: { drop: ["ALL"] } }), c("b", { ...ok, allowPrivilegeEscalation: true }), c("ok", ok)])),
    'allowPrivilegeEscalation != false (containers "a", "b" must set securityContext.allowPrivilegeEscalation=false)',
  );
});

test("capabilities_restricted: drop ALL, and what is added", () => {
  const spec = restrictedPod({}, [
    { name: "a", image: "a", securityContext: { allowPrivilegeEscalation: false } },
    {
      name: "b",
      image: "b",
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"], add: ["SYS_ADMIN", "NET_BIND_SERVICE", "CHOWN"] } },
    },
  ]);
  assert.equal(
    detailOf("restricted", spec),
    'unrestricted capabilities (container "a" must set securityContext.capabilities.drop=["ALL"]; container "b" must not include "CHOWN", "SYS_ADMIN" in securityContext.capabilities.add)',
  );
});

test("runAsNonRoot: set to false, or not set", () => {
  const c = (name: string, extra: Json = {}) => ({ name, image: name, securityContext: { ...ok, ...extra } });
  assert.equal(
    detailOf("restricted", {
      securityContext: { runAsNonRoot: false, seccompProfile: { type: "RuntimeDefault" } },
      containers: [c("a", { runAsNonRoot: false }), c("b")],
    }),
    'runAsNonRoot != true (pod and container "a" must not set securityContext.runAsNonRoot=false)',
  );
  assert.equal(
    detailOf("restricted", { securityContext: { seccompProfile: { type: "RuntimeDefault" } }, containers: [c("a"), c("b"), c("c", { runAsNonRoot: true })] }),
    'runAsNonRoot != true (pod or containers "a", "b" must set securityContext.runAsNonRoot=true)',
  );
});

test("runAsUser", () => {
  const spec = restrictedPod({ securityContext: { runAsNonRoot: true, runAsUser: 0, seccompProfile: { type: "RuntimeDefault" } } }, [
    { name: "a", image: "a", securityContext: { ...ok, runAsUser: 0 } },
  ]);
  assert.equal(detailOf("restricted", spec), 'runAsUser=0 (pod and container "a" must not set runAsUser=0)');
});

test("seccompProfile_restricted: a bad type, or none", () => {
  const c = (name: string, extra: Json = {}) => ({ name, image: name, securityContext: { ...ok, ...extra } });
  assert.equal(
    detailOf("restricted", {
      securityContext: { runAsNonRoot: true },
      containers: [c("a"), c("b", { seccompProfile: { type: "Localhost", localhostProfile: "p" } })],
    }),
    'seccompProfile (pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
  );
  assert.equal(
    detailOf("restricted", restrictedPod({}, [c("a", { seccompProfile: { type: "Unconfined" } })])),
    'seccompProfile (container "a" must not set securityContext.seccompProfile.type to "Unconfined")',
  );
});

test("the whole denial: baseline reasons sorted, then restricted ones (matches kube-apiserver's output for such a pod)", () => {
  const spec = {
    securityContext: {
      seLinuxOptions: { user: "x", role: "y" },
      sysctls: [
        { name: "net.core.somaxconn", value: "1" },
        { name: "kernel.msgmax", value: "1" },
      ],
    },
    containers: [{ name: "my-pod", image: "app" }],
  };
  const policy = bindProfileClusterWide("restricted@v1.32", profiles);
  const [pod] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "sysctlpod" }, spec });
  assert.equal(
    violatesMessage("restricted:v1.32", psaCheckResults(pod!, podRestrictionFindings(policy, pod!))),
    'violates PodSecurity "restricted:v1.32": seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: user may not be set; role may not be set), ' +
      "forbidden sysctls (net.core.somaxconn, kernel.msgmax), " +
      'allowPrivilegeEscalation != false (container "my-pod" must set securityContext.allowPrivilegeEscalation=false), ' +
      'unrestricted capabilities (container "my-pod" must set securityContext.capabilities.drop=["ALL"]), ' +
      'runAsNonRoot != true (pod or container "my-pod" must set securityContext.runAsNonRoot=true), ' +
      'seccompProfile (pod or container "my-pod" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
  );
});

test("templates are worded as pods (their fields under spec.template)", () => {
  const policy = bindProfileClusterWide("baseline", profiles);
  const [pod] = podsInObject({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "d" },
    spec: { template: { spec: { containers: [{ name: "a", image: "a", securityContext: { privileged: true } }] } } },
  });
  assert.equal(
    forbiddenDetail(psaCheckResults(pod!, podRestrictionFindings(policy, pod!))),
    'privileged (container "a" must not set securityContext.privileged=true)',
  );
});

test("every denied case of the Pod Security Standards table gets PSA's reason with a detail", async () => {
  const cases = readKubeYaml(await readFile(new URL("../../fixtures/pss/cases.yaml", import.meta.url), "utf8")).documents[0]!.value as Array<
    Json & { pod: Json }
  >;
  let denied = 0;
  for (const level of ["baseline", "restricted"] as const) {
    const policy = bindProfileClusterWide(level, profiles);
    for (const c of cases) {
      for (const pod of podsInObject(c.pod)) {
        const results = psaCheckResults(pod, podRestrictionFindings(policy, pod));
        assert.equal(results.length > 0, c[level] === "deny", `${level} ${String(c.name)}`);
        for (const r of results) assert.notEqual(r.detail, "", `${level} ${String(c.name)}: ${r.reason} has no detail`);
        if (results.length > 0) denied++;
      }
    }
  }
  assert.ok(denied > 100);
  // At every policy version, each failed check is worded with a detail drawn from the pod.
  for (const minor of policyMinors()) {
    for (const level of ["baseline", "restricted"]) {
      const policy = bindProfileClusterWide(`${level}@v1.${minor}`, profiles);
      for (const c of cases)
        for (const pod of podsInObject(c.pod))
          for (const r of psaCheckResults(pod, podRestrictionFindings(policy, pod)))
            assert.notEqual(r.detail, "", `${level}@v1.${minor} ${String(c.name)}: ${r.reason}`);
    }
  }
});

test("findings PSA has no words for keep their rule; a check the pod does not show keeps PSA's reason alone", () => {
  const [pod] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec: { containers: [{ name: "a", image: "a" }] } });
  const results = psaCheckResults(pod!, [
    { field: "spec.containers[0].image", rule: "my-policy/images", message: "x" },
    { field: "spec.containers[0].securityContext.privileged", rule: "baseline/privileged", message: "is true; must be false" },
  ]);
  assert.deepEqual(results, [
    { check: "privileged", reason: "privileged", detail: "" },
    { check: "my-policy/images", reason: "my-policy/images", detail: "" },
  ]);
  assert.equal(forbiddenDetail(results), "privileged, my-policy/images");
  assert.equal(psaCheckOf("restricted/privileged"), undefined);
  assert.equal(psaCheckOf("privileged"), undefined);
});
