// Restrictions on the fields of a Pod, through compilePodRestriction + podRestrictionFindings: container
// alternatives and the container lists, effective security contexts, images, ports, probes and lifecycle
// handlers, volumes, metadata, and compile issues for unknown or misused fields.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compilePodRestriction, podRestrictionFindings, type PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import type { CompileIssue, Finding } from "../../../src/core/pod-restriction/restrictions/restriction-support.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";

function compile(spec: unknown): { policy?: PodRestriction; issues: CompileIssue[] } {
  return compilePodRestriction({ apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "p" }, spec });
}

function policy(spec: unknown): PodRestriction {
  const r = compile(spec);
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

function pod(spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: "pod" }): Record<string, unknown> {
  return { apiVersion: "v1", kind: "Pod", metadata, spec };
}

function findings(p: PodRestriction, obj: Record<string, unknown>): Finding[] {
  const [under] = podsInObject(obj);
  assert.ok(under);
  return podRestrictionFindings(p, under);
}

const c = (name: string, extra: Record<string, unknown> = {}) => ({ name, image: "registry.example.com/app:1.0", ...extra });

function assertFindings(actual: Finding[], expected: Array<{ field: string; rule?: string; message: string }>): void {
  assert.equal(actual.length, expected.length, JSON.stringify(actual, null, 1));
  expected.forEach((e, i) => {
    const a = actual[i]!;
    assert.equal(a.field, e.field, JSON.stringify(a));
    if (e.rule !== undefined) assert.equal(a.rule, e.rule, JSON.stringify(a));
    assert.ok(a.message.includes(e.message), `${JSON.stringify(a.message)} should contain ${JSON.stringify(e.message)}`);
  });
}

describe("container alternatives", () => {
  const p = policy({
    spec: { containers: [{ name: { allowed: ["web", "web-*"] } }, { name: { allowed: ["sidecar"] }, imagePullPolicy: { allowed: ["Always"] } }] },
  });

  const cases: Array<{ name: string; container: Record<string, unknown>; pass: boolean }> = [
    { name: "matches the first entry", container: c("web-1"), pass: true },
    { name: "matches the second entry", container: c("sidecar", { imagePullPolicy: "Always" }), pass: true },
    { name: "the second entry's name, not its pull policy", container: c("sidecar", { imagePullPolicy: "IfNotPresent" }), pass: false },
    { name: "matches neither", container: c("db"), pass: false },
  ];
  for (const t of cases) {
    it(`a container that ${t.name} ${t.pass ? "passes" : "fails"}`, () => {
      const out = findings(p, pod({ containers: [c("web"), t.container] }));
      if (t.pass) assert.deepEqual(out, []);
      else assert.ok(out.length > 0);
    });
  }

  it("when no entry passes, the findings of every entry are reported", () => {
    const out = findings(p, pod({ containers: [c("db")] }));
    assertFindings(out, [
      { field: "spec.containers[0].name", rule: "spec.spec.containers[0].name", message: 'is "db"; allowed: "web", "web-*"' },
      { field: "spec.containers[0].name", rule: "spec.spec.containers[1].name", message: 'is "db"; allowed: "sidecar"' },
      { field: "spec.containers[0].imagePullPolicy", rule: "spec.spec.containers[1].imagePullPolicy", message: 'is ""; allowed: "Always"' },
    ]);
  });

  it("a single mapping stands for a one-entry list", () => {
    const single = policy({ spec: { containers: { name: { allowed: ["web"] } } } });
    assertFindings(findings(single, pod({ containers: [c("db")] })), [
      { field: "spec.containers[0].name", rule: "spec.spec.containers.name", message: 'is "db"' },
    ]);
  });
});

describe("init and ephemeral containers", () => {
  const privileged = { securityContext: { privileged: { allowNil: true, require: false } } };
  const bad = { securityContext: { privileged: true } };

  it("default to the containers restriction", () => {
    const p = policy({ spec: { containers: [privileged] } });
    const out = findings(p, pod({ initContainers: [c("init", bad)], containers: [c("app")], ephemeralContainers: [c("debug", bad)] }));
    assertFindings(out, [
      {
        field: "spec.initContainers[0].securityContext.privileged",
        rule: "spec.spec.containers[0].securityContext.privileged",
        message: "is true; must be false",
      },
      {
        field: "spec.ephemeralContainers[0].securityContext.privileged",
        rule: "spec.spec.containers[0].securityContext.privileged",
        message: "is true; must be false",
      },
    ]);
  });

  it("`initContainers: []` opts init containers out; ephemeral containers still default", () => {
    const p = policy({ spec: { containers: [privileged], initContainers: [] } });
    const out = findings(p, pod({ initContainers: [c("init", bad)], containers: [c("app")], ephemeralContainers: [c("debug", bad)] }));
    assertFindings(out, [{ field: "spec.ephemeralContainers[0].securityContext.privileged", message: "must be false" }]);
  });

  it("their own restriction replaces the containers restriction", () => {
    const p = policy({ spec: { containers: [privileged], initContainers: [{ name: { allowed: ["init-*"] } }] } });
    assert.deepEqual(findings(p, pod({ initContainers: [c("init-1", bad)], containers: [c("app")] })), []);
    assertFindings(findings(p, pod({ initContainers: [c("setup")], containers: [c("app", bad)] })), [
      { field: "spec.containers[0].securityContext.privileged", message: "must be false" },
      { field: "spec.initContainers[0].name", rule: "spec.spec.initContainers[0].name", message: 'is "setup"' },
    ]);
  });

  it("a container list that is not a list is reported", () => {
    const p = policy({ spec: { containers: [privileged] } });
    assertFindings(findings(p, pod({ containers: { name: "x" } })), [{ field: "spec.containers", message: "must be a list" }]);
  });
});

describe("effective security context", () => {
  const runAsUser = policy({ spec: { containers: [{ securityContext: { runAsUser: { ranges: [{ min: 1 }] } } }] } });

  const cases: Array<{
    name: string;
    podSc?: Record<string, unknown>;
    containerSc?: Record<string, unknown>;
    expect: Array<{ field: string; message: string }>;
  }> = [
    { name: "container unset, pod set and valid", podSc: { runAsUser: 1000 }, expect: [] },
    {
      name: "container unset, pod set and invalid: the pod-level field is named",
      podSc: { runAsUser: 0 },
      expect: [{ field: "spec.securityContext.runAsUser", message: "is 0; must be at least 1 (set at pod level, effective for spec.containers[0])" }],
    },
    { name: "container set overrides an invalid pod value", podSc: { runAsUser: 0 }, containerSc: { runAsUser: 1000 }, expect: [] },
    {
      name: "container set and invalid overrides a valid pod value",
      podSc: { runAsUser: 1000 },
      containerSc: { runAsUser: 0 },
      expect: [{ field: "spec.containers[0].securityContext.runAsUser", message: "is 0; must be at least 1" }],
    },
    { name: "both unset", expect: [{ field: "spec.containers[0].securityContext.runAsUser", message: "is unset; must be set (at least 1)" }] },
    {
      name: "container has a securityContext without the field",
      podSc: { runAsUser: 0 },
      containerSc: { privileged: false },
      expect: [{ field: "spec.securityContext.runAsUser", message: "is 0" }],
    },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const spec: Record<string, unknown> = { containers: [c("app", t.containerSc ? { securityContext: t.containerSc } : {})] };
      if (t.podSc) spec.securityContext = t.podSc;
      const out = findings(runAsUser, pod(spec));
      assertFindings(
        out,
        t.expect.map((e) => ({ ...e, rule: "spec.spec.containers[0].securityContext.runAsUser" })),
      );
    });
  }

  it("a pod value inherited by several containers is reported once", () => {
    const out = findings(runAsUser, pod({ securityContext: { runAsUser: 0 }, containers: [c("a"), c("b")], initContainers: [c("i")] }));
    assertFindings(out, [{ field: "spec.securityContext.runAsUser", message: "is 0; must be at least 1" }]);
  });

  it("fields that are not inherited are not taken from the pod (privileged is container-only)", () => {
    const p = policy({ spec: { containers: [{ securityContext: { privileged: { require: false } } }] } });
    assertFindings(findings(p, pod({ containers: [c("a")] })), [
      { field: "spec.containers[0].securityContext.privileged", message: "is unset; must be set (to false)" },
    ]);
  });

  it("seLinuxOptions are inherited as a whole struct", () => {
    const p = policy({ spec: { containers: [{ securityContext: { seLinuxOptions: { allowNil: true, type: { forbidden: ["spc_t"] } } } }] } });
    assertFindings(findings(p, pod({ securityContext: { seLinuxOptions: { type: "spc_t" } }, containers: [c("a")] })), [
      { field: "spec.securityContext.seLinuxOptions.type", message: 'is "spc_t", which is forbidden' },
    ]);
    // The container's own struct replaces the pod's entirely: the pod's type does not leak into it.
    assert.deepEqual(
      findings(
        p,
        pod({ securityContext: { seLinuxOptions: { type: "spc_t" } }, containers: [c("a", { securityContext: { seLinuxOptions: { level: "s0" } } })] }),
      ),
      [],
    );
  });

  // security-context-restriction.ts: "A denial then names the pod-level field and says for which container
  // it was effective." That holds for a scalar (runAsUser) but also for a field inside a struct taken whole
  // from the pod (seccompProfile, seLinuxOptions, appArmorProfile, windowsOptions).
  const inheritedStructs: Array<{ name: string; restriction: Record<string, unknown>; podSc: Record<string, unknown>; field: string }> = [
    {
      name: "seccompProfile.type",
      restriction: { seccompProfile: { allowNil: true, type: { allowed: ["RuntimeDefault"] } } },
      podSc: { seccompProfile: { type: "Unconfined" } },
      field: "spec.securityContext.seccompProfile.type",
    },
    {
      name: "seLinuxOptions.type",
      restriction: { seLinuxOptions: { allowNil: true, type: { forbidden: ["spc_t"] } } },
      podSc: { seLinuxOptions: { type: "spc_t" } },
      field: "spec.securityContext.seLinuxOptions.type",
    },
    {
      name: "appArmorProfile.type",
      restriction: { appArmorProfile: { allowNil: true, type: { forbidden: ["Unconfined"] } } },
      podSc: { appArmorProfile: { type: "Unconfined" } },
      field: "spec.securityContext.appArmorProfile.type",
    },
    {
      name: "windowsOptions.hostProcess",
      restriction: { windowsOptions: { allowNil: true, hostProcess: { allowNil: true, require: false } } },
      podSc: { windowsOptions: { hostProcess: true } },
      field: "spec.securityContext.windowsOptions.hostProcess",
    },
  ];
  for (const t of inheritedStructs) {
    it(`a pod-level ${t.name} inherited by a container says for which container it was effective`, () => {
      const p = policy({ spec: { containers: [{ securityContext: t.restriction }] } });
      const out = findings(p, pod({ securityContext: t.podSc, containers: [c("a")] }));
      assertFindings(out, [{ field: t.field, message: "(set at pod level, effective for spec.containers[0])" }]);
    });
  }

  describe("windowsOptions merge field by field", () => {
    const p = policy({
      spec: {
        containers: [
          {
            securityContext: {
              windowsOptions: {
                allowNil: true,
                runAsUserName: { allowNil: true, forbidden: ["ContainerAdministrator"] },
                hostProcess: { allowNil: true, require: false },
                gmsaCredentialSpecName: { allowNil: true, forbidden: ["forbidden-spec"] },
              },
            },
          },
        ],
      },
    });
    const cases: Array<{
      name: string;
      podWo?: Record<string, unknown>;
      containerWo?: Record<string, unknown>;
      expect: Array<{ field: string; message: string }>;
    }> = [
      {
        name: "a field the container leaves unset comes from the pod",
        podWo: { runAsUserName: "ContainerAdministrator" },
        containerWo: { hostProcess: false },
        expect: [
          {
            field: "spec.securityContext.windowsOptions.runAsUserName",
            message: 'is "ContainerAdministrator", which is forbidden (set at pod level, effective for spec.containers[0])',
          },
        ],
      },
      {
        name: "a field the container sets overrides the pod's",
        podWo: { runAsUserName: "ContainerAdministrator" },
        containerWo: { runAsUserName: "ContainerUser" },
        expect: [],
      },
      {
        name: "hostProcess from the pod with other container options",
        podWo: { hostProcess: true },
        containerWo: { runAsUserName: "ContainerUser" },
        expect: [{ field: "spec.securityContext.windowsOptions.hostProcess", message: "is true; must be false" }],
      },
      {
        name: "the container's own field is reported at the container",
        podWo: { runAsUserName: "ContainerUser" },
        containerWo: { hostProcess: true },
        expect: [{ field: "spec.containers[0].securityContext.windowsOptions.hostProcess", message: "is true; must be false" }],
      },
      {
        name: "no container windowsOptions: the pod's are used",
        podWo: { hostProcess: true },
        expect: [{ field: "spec.securityContext.windowsOptions.hostProcess", message: "is true; must be false" }],
      },
      // The GMSA pair goes together: setting either at the container replaces both.
      {
        name: "GMSA: the container's gmsaCredentialSpec replaces the pod's gmsaCredentialSpecName",
        podWo: { gmsaCredentialSpecName: "forbidden-spec" },
        containerWo: { gmsaCredentialSpec: "{}" },
        expect: [],
      },
      {
        name: "GMSA: the pod's pair is used when the container sets neither",
        podWo: { gmsaCredentialSpecName: "forbidden-spec" },
        containerWo: { runAsUserName: "ContainerUser" },
        expect: [{ field: "spec.securityContext.windowsOptions.gmsaCredentialSpecName", message: "which is forbidden" }],
      },
    ];
    for (const t of cases) {
      it(t.name, () => {
        const spec: Record<string, unknown> = { containers: [c("app", t.containerWo ? { securityContext: { windowsOptions: t.containerWo } } : {})] };
        if (t.podWo) spec.securityContext = { windowsOptions: t.podWo };
        assertFindings(findings(p, pod(spec)), t.expect);
      });
    }
  });
});

describe("image restriction", () => {
  const cases: Array<{ name: string; restriction: unknown; image: unknown; expect: Array<{ field: string; message: string }> }> = [
    { name: "registry allowed", restriction: { registry: { allowed: ["registry.example.com"] } }, image: "registry.example.com/team/app:1", expect: [] },
    {
      name: "registry of a Docker Hub image",
      restriction: { registry: { allowed: ["registry.example.com"] } },
      image: "nginx",
      expect: [{ field: "spec.containers[0].image (registry)", message: 'is "docker.io"; allowed: "registry.example.com"' }],
    },
    { name: "registry is lowercased", restriction: { registry: { allowed: ["registry.example.com"] } }, image: "REGISTRY.example.com/app:1", expect: [] },
    { name: "repository allowed", restriction: { repository: { allowed: ["library/*"] } }, image: "nginx:1.27", expect: [] },
    {
      name: "repository not allowed",
      restriction: { repository: { allowed: ["library/*"] } },
      image: "team/app:1",
      expect: [{ field: "spec.containers[0].image (repository)", message: 'is "team/app"; allowed: "library/*"' }],
    },
    { name: "image (seed spelling) is the repository", restriction: { image: { allowed: ["library/nginx"] } }, image: "docker.io/library/nginx:1", expect: [] },
    {
      name: "image (seed spelling) denies another repository",
      restriction: { image: { allowed: ["library/nginx"] } },
      image: "team/nginx",
      expect: [{ field: "spec.containers[0].image (repository)", message: 'is "team/nginx"' }],
    },
    {
      name: "an implicit tag is latest",
      restriction: { tag: { forbidden: ["latest"] } },
      image: "nginx",
      expect: [{ field: "spec.containers[0].image (tag)", message: 'is "latest", which is forbidden' }],
    },
    { name: "an explicit tag", restriction: { tag: { regex: "v[0-9]+(\\.[0-9]+)*" } }, image: "nginx:v1.2", expect: [] },
    { name: "a digest-only image has no tag", restriction: { tag: { forbidden: ["latest"] } }, image: `nginx@sha256:${"a".repeat(64)}`, expect: [] },
    {
      name: "digest required: present",
      restriction: { digest: { forbidNil: true } },
      image: `registry.example.com/app:1@sha256:${"b".repeat(64)}`,
      expect: [],
    },
    {
      name: "digest required: absent",
      restriction: { digest: { forbidNil: true } },
      image: "registry.example.com/app:1",
      expect: [{ field: "spec.containers[0].image (digest)", message: "is unset; must be set" }],
    },
    {
      name: "digest algorithm",
      restriction: { digest: { allowed: ["sha512:*"] } },
      image: `app@sha256:${"c".repeat(64)}`,
      expect: [{ field: "spec.containers[0].image (digest)", message: "allowed: " }],
    },
    {
      name: "invalid reference",
      restriction: { registry: { allowed: ["*"] } },
      image: "Not A/Reference",
      expect: [{ field: "spec.containers[0].image", message: 'invalid image reference "Not A/Reference"' }],
    },
    {
      name: "no image",
      restriction: { registry: { allowed: ["*"] } },
      image: undefined,
      expect: [{ field: "spec.containers[0].image", message: "has no image" }],
    },
    {
      name: "alternatives: the second passes",
      restriction: [{ registry: { allowed: ["a.example.com"] } }, { registry: { allowed: ["b.example.com"] }, tag: { forbidden: ["latest"] } }],
      image: "b.example.com/app:1",
      expect: [],
    },
    {
      name: "alternatives: none passes",
      restriction: [{ registry: { allowed: ["a.example.com"] } }, { registry: { allowed: ["b.example.com"] }, tag: { forbidden: ["latest"] } }],
      image: "b.example.com/app",
      expect: [
        { field: "spec.containers[0].image (registry)", message: 'is "b.example.com"; allowed: "a.example.com"' },
        { field: "spec.containers[0].image (tag)", message: 'is "latest", which is forbidden' },
      ],
    },
  ];
  for (const t of cases) {
    it(t.name, () => {
      const p = policy({ spec: { containers: [{ image: t.restriction }] } });
      const container: Record<string, unknown> = { name: "app" };
      if (t.image !== undefined) container.image = t.image;
      assertFindings(findings(p, pod({ containers: [container] })), t.expect);
    });
  }

  it("the rule names the image part of the policy", () => {
    const p = policy({ spec: { containers: [{ image: [{ registry: { allowed: ["x.io"] } }] }] } });
    assertFindings(findings(p, pod({ containers: [{ name: "a", image: "nginx" }] })), [
      { field: "spec.containers[0].image (registry)", rule: "spec.spec.containers[0].image[0].registry", message: "allowed" },
    ]);
  });

  it("unknown image parts are compile issues", () => {
    const r = compile({ spec: { containers: [{ image: { name: { allowed: ["x"] } } }] } });
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path),
      [["spec", "spec", "containers", 0, "image", "name"]],
    );
    assert.ok(r.issues[0]!.message.includes("known fields: registry, repository, tag, digest"), r.issues[0]!.message);
  });
});

describe("ports", () => {
  const p = policy({ spec: { containers: [{ ports: { hostPort: { ranges: [{ min: 0, max: 0 }] } } }] } });
  it("a container port without hostPort reads as 0 and passes", () => {
    assert.deepEqual(findings(p, pod({ containers: [c("a", { ports: [{ containerPort: 80 }] })] })), []);
  });
  it("a hostPort fails at its port", () => {
    assertFindings(findings(p, pod({ containers: [c("a", { ports: [{ containerPort: 80 }, { containerPort: 443, hostPort: 8443 }] })] })), [
      { field: "spec.containers[0].ports[1].hostPort", rule: "spec.spec.containers[0].ports.hostPort", message: "is 8443; must be 0" },
    ]);
  });
  it("a container without ports passes", () => {
    assert.deepEqual(findings(p, pod({ containers: [c("a")] })), []);
  });
  it("the collection rules apply to the list", () => {
    const q = policy({ spec: { containers: [{ ports: { requireEmpty: true } }] } });
    assertFindings(findings(q, pod({ containers: [c("a", { ports: [{ containerPort: 80 }] })] })), [
      { field: "spec.containers[0].ports", message: "has 1 ports; must be empty" },
    ]);
  });
  it("hostPort is not a pointer: allowNil is a compile issue", () => {
    const r = compile({ spec: { containers: [{ ports: { hostPort: { allowNil: true, ranges: [{ max: 0 }] } } }] } });
    assert.deepEqual(
      r.issues.map((i) => i.path),
      [["spec", "spec", "containers", 0, "ports", "hostPort", "allowNil"]],
    );
    assert.ok(r.issues[0]!.message.includes("not a pointer in the Pod API"));
  });
});

describe("probes and lifecycle handlers", () => {
  const noHost = { host: { allowed: [""] } };
  const p = policy({
    spec: {
      containers: [
        {
          livenessProbe: { httpGet: noHost, tcpSocket: noHost },
          readinessProbe: { httpGet: noHost },
          startupProbe: { tcpSocket: noHost },
          lifecycle: { postStart: { httpGet: noHost }, preStop: { tcpSocket: noHost } },
        },
      ],
    },
  });

  it("handlers without a host pass, as do containers without probes", () => {
    const probes = {
      livenessProbe: { httpGet: { port: 8080, path: "/healthz" } },
      readinessProbe: { exec: { command: ["true"] } },
      lifecycle: { preStop: { tcpSocket: { port: 80 } } },
    };
    assert.deepEqual(findings(p, pod({ containers: [c("a", probes), c("b")] })), []);
  });

  const cases: Array<{ key: string; value: Record<string, unknown>; field: string }> = [
    { key: "livenessProbe", value: { httpGet: { host: "169.254.169.254", port: 80 } }, field: "spec.containers[0].livenessProbe.httpGet.host" },
    { key: "livenessProbe", value: { tcpSocket: { host: "10.0.0.1", port: 22 } }, field: "spec.containers[0].livenessProbe.tcpSocket.host" },
    { key: "readinessProbe", value: { httpGet: { host: "example.com", port: 80 } }, field: "spec.containers[0].readinessProbe.httpGet.host" },
    { key: "startupProbe", value: { tcpSocket: { host: "example.com", port: 80 } }, field: "spec.containers[0].startupProbe.tcpSocket.host" },
    { key: "lifecycle", value: { postStart: { httpGet: { host: "example.com", port: 80 } } }, field: "spec.containers[0].lifecycle.postStart.httpGet.host" },
    { key: "lifecycle", value: { preStop: { tcpSocket: { host: "example.com", port: 80 } } }, field: "spec.containers[0].lifecycle.preStop.tcpSocket.host" },
  ];
  for (const t of cases) {
    it(`a host in ${t.field} fails`, () => {
      const out = findings(p, pod({ containers: [c("a", { [t.key]: t.value })] }));
      assertFindings(out, [{ field: t.field, message: 'allowed: ""' }]);
      assert.equal(out[0]!.rule, `spec.spec.${t.field.replace("spec.containers[0]", "containers[0]")}`);
    });
  }
});

describe("volumes", () => {
  it("a volume whose type no entry covers is denied (one entry: the volumeType message)", () => {
    const p = policy({ spec: { volumes: { volumeType: { whitelist: ["configMap", "secret"] } } } });
    assert.deepEqual(findings(p, pod({ containers: [c("a")], volumes: [{ name: "cfg", configMap: { name: "x" } }] })), []);
    assertFindings(
      findings(
        p,
        pod({
          containers: [c("a")],
          volumes: [
            { name: "cfg", configMap: { name: "x" } },
            { name: "host", hostPath: { path: "/" } },
          ],
        }),
      ),
      [{ field: "spec.volumes[1].hostPath", rule: "spec.spec.volumes.volumeType", message: 'volume type is "hostPath"; allowed: "configMap", "secret"' }],
    );
  });

  it("a volume whose type no entry covers is denied (several entries)", () => {
    const p = policy({ spec: { volumes: [{ volumeType: { allowed: ["configMap"] } }, { volumeType: { allowed: ["secret"] } }] } });
    assertFindings(findings(p, pod({ containers: [c("a")], volumes: [{ name: "data", emptyDir: {} }] })), [
      { field: "spec.volumes[0]", rule: "spec.spec.volumes", message: 'volume "data" has type "emptyDir", which no volume restriction allows' },
    ]);
  });

  it("a volume with no source is judged as the emptyDir the apiserver defaults it to", () => {
    const allowsEmptyDir = policy({ spec: { volumes: { volumeType: { allowed: ["configMap", "emptyDir"] } } } });
    assert.deepEqual(findings(allowsEmptyDir, pod({ containers: [c("a")], volumes: [{ name: "scratch" }] })), []);
    const configOnly = policy({ spec: { volumes: { volumeType: { allowed: ["configMap"] } } } });
    const out = findings(configOnly, pod({ containers: [c("a")], volumes: [{ name: "scratch" }] }));
    assert.equal(out.length, 1);
    assert.match(out[0]!.message, /volume type is "emptyDir"/);
  });

  it("an entry without volumeType covers every volume", () => {
    const p = policy({ spec: { volumes: [{ hostPath: { path: { allowed: ["/var/log"] } } }] } });
    assert.deepEqual(
      findings(
        p,
        pod({
          containers: [c("a")],
          volumes: [
            { name: "d", emptyDir: {} },
            { name: "l", hostPath: { path: "/var/log" } },
          ],
        }),
      ),
      [],
    );
  });

  describe("a covered volume must satisfy one covering entry", () => {
    const p = policy({
      spec: {
        volumes: [
          { volumeType: { allowed: ["hostPath"] }, hostPath: { path: { allowed: ["/var/log"] }, type: { allowNil: true, allowed: ["Directory"] } } },
          { volumeType: { allowed: ["hostPath"] }, hostPath: { path: { allowed: ["/data"] } } },
          { volumeType: { allowed: ["configMap", "emptyDir"] } },
        ],
      },
    });
    const cases: Array<{ path: string; type?: string; expect: Array<{ field: string; rule: string; message: string }> }> = [
      { path: "/var/log/app", expect: [] },
      { path: "/var/log", type: "Directory", expect: [] },
      { path: "/data/db", type: "File", expect: [] },
      {
        path: "/var/logs",
        expect: [
          { field: "spec.volumes[0].hostPath.path", rule: "spec.spec.volumes[0].hostPath.path", message: 'is "/var/logs"; allowed: "/var/log"' },
          { field: "spec.volumes[0].hostPath.path", rule: "spec.spec.volumes[1].hostPath.path", message: 'is "/var/logs"; allowed: "/data"' },
        ],
      },
      {
        path: "/var/log/../../etc",
        expect: [
          { field: "spec.volumes[0].hostPath.path", rule: "spec.spec.volumes[0].hostPath.path", message: "allowed" },
          { field: "spec.volumes[0].hostPath.path", rule: "spec.spec.volumes[1].hostPath.path", message: "allowed" },
        ],
      },
      {
        path: "/var/log/x",
        type: "Socket",
        expect: [
          { field: "spec.volumes[0].hostPath.type", rule: "spec.spec.volumes[0].hostPath.type", message: 'is "Socket"; allowed: "Directory"' },
          { field: "spec.volumes[0].hostPath.path", rule: "spec.spec.volumes[1].hostPath.path", message: 'is "/var/log/x"; allowed: "/data"' },
        ],
      },
    ];
    for (const t of cases) {
      it(`hostPath ${t.path}${t.type ? ` (${t.type})` : ""} ${t.expect.length === 0 ? "passes" : "fails"}`, () => {
        const hostPath: Record<string, unknown> = { path: t.path };
        if (t.type) hostPath.type = t.type;
        const out = findings(
          p,
          pod({
            containers: [c("a")],
            volumes: [
              { name: "h", hostPath },
              { name: "cfg", configMap: { name: "x" } },
            ],
          }),
        );
        assertFindings(out, t.expect);
      });
    }
  });

  describe("mount rules apply to every mount of the covered volumes", () => {
    const p = policy({
      spec: {
        volumes: [{ volumeType: { allowed: ["hostPath"] }, mount: { readOnly: { require: true } } }, { volumeType: { forbidden: ["hostPath"] } }],
      },
    });
    const volumes = [
      { name: "logs", hostPath: { path: "/var/log" } },
      { name: "scratch", emptyDir: {} },
    ];

    it("read-only mounts of the hostPath volume pass; other volumes' mounts are not restricted", () => {
      const spec = {
        volumes,
        containers: [
          c("a", {
            volumeMounts: [
              { name: "logs", mountPath: "/logs", readOnly: true },
              { name: "scratch", mountPath: "/tmp" },
            ],
          }),
        ],
      };
      assert.deepEqual(findings(p, pod(spec)), []);
    });

    it("a writable mount in any container list fails at that mount", () => {
      const spec = {
        volumes,
        initContainers: [c("init", { volumeMounts: [{ name: "logs", mountPath: "/logs" }] })],
        containers: [
          c("a", {
            volumeMounts: [
              { name: "scratch", mountPath: "/tmp" },
              { name: "logs", mountPath: "/logs", readOnly: true },
            ],
          }),
        ],
        ephemeralContainers: [c("debug", { volumeMounts: [{ name: "logs", mountPath: "/logs", readOnly: false }] })],
      };
      assertFindings(findings(p, pod(spec)), [
        { field: "spec.initContainers[0].volumeMounts[0].readOnly", rule: "spec.spec.volumes[0].mount.readOnly", message: "is false; must be true" },
        { field: "spec.ephemeralContainers[0].volumeMounts[0].readOnly", rule: "spec.spec.volumes[0].mount.readOnly", message: "is false; must be true" },
      ]);
    });
  });

  it("requireEmpty on an entry forbids the volumes it covers", () => {
    const p = policy({ spec: { volumes: [{ volumeType: { allowed: ["hostPath"] }, requireEmpty: true }, { volumeType: { forbidden: ["hostPath"] } }] } });
    assert.deepEqual(findings(p, pod({ containers: [c("a")], volumes: [{ name: "cfg", configMap: { name: "x" } }] })), []);
    assertFindings(
      findings(
        p,
        pod({
          containers: [c("a")],
          volumes: [
            { name: "cfg", configMap: { name: "x" } },
            { name: "h", hostPath: { path: "/" } },
          ],
        }),
      ),
      [{ field: "spec.volumes", rule: "spec.spec.volumes[0]", message: "has 1 volumes covered by this restriction; must be empty" }],
    );
  });

  it("forbidEmpty on an entry requires a covered volume", () => {
    const p = policy({ spec: { volumes: [{ volumeType: { allowed: ["emptyDir"] }, forbidEmpty: true }, { volumeType: { forbidden: ["emptyDir"] } }] } });
    assertFindings(findings(p, pod({ containers: [c("a")] })), [{ field: "spec.volumes", rule: "spec.spec.volumes[0]", message: "is empty" }]);
  });

  it("unknown volume entry keys are compile issues naming the known keys", () => {
    const r = compile({ spec: { volumes: [{ nfs: { server: { allowed: ["x"] } } }] } });
    assert.deepEqual(
      r.issues.map((i) => i.path),
      [["spec", "spec", "volumes", 0, "nfs"]],
    );
    assert.ok(r.issues[0]!.message.includes("known fields: forbidEmpty, requireEmpty, mount, volumeType, hostPath"), r.issues[0]!.message);
  });
});

describe("metadata", () => {
  const p = policy({ metadata: { name: { regex: "web-.*" }, labels: { requiredKeys: ["app"] } } });

  it("a Pod's name is restricted", () => {
    assert.deepEqual(findings(p, pod({ containers: [c("a")] }, { name: "web-1", labels: { app: "web" } })), []);
    assertFindings(findings(p, pod({ containers: [c("a")] }, { name: "db-1", labels: { app: "db" } })), [
      { field: "metadata.name", rule: "spec.metadata.name", message: 'is "db-1"; must match' },
    ]);
  });

  it("a pod template's name is not (its pods get generated names); its labels are", () => {
    const deployment = (labels: Record<string, string>) => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "db" },
      spec: { template: { metadata: { labels }, spec: { containers: [c("a")] } } },
    });
    assert.deepEqual(findings(p, deployment({ app: "db" })), []);
    assertFindings(findings(p, deployment({ tier: "db" })), [
      { field: "spec.template.metadata.labels", rule: "spec.metadata.labels", message: 'must have the key "app"' },
    ]);
  });
});

describe("compile issues", () => {
  const cases: Array<{ name: string; spec: unknown; path: Array<string | number>; message: string[] }> = [
    {
      name: "an unknown container security context field",
      spec: { spec: { containers: [{ securityContext: { privilegd: { require: false } } }] } },
      path: ["spec", "spec", "containers", 0, "securityContext", "privilegd"],
      message: ['unknown field "privilegd"; known fields: ', "privileged", "allowPrivilegeEscalation", "runAsUser"],
    },
    {
      name: "an unknown PodSpec field",
      spec: { spec: { hostNetwerk: { require: false } } },
      path: ["spec", "spec", "hostNetwerk"],
      message: ['unknown field "hostNetwerk"; known fields: ', "securityContext", "volumes", "containers", "initContainers"],
    },
    {
      name: "an unknown container field",
      spec: { spec: { containers: [{ command: { allowed: ["sh"] } }] } },
      path: ["spec", "spec", "containers", 0, "command"],
      message: ['unknown field "command"', "image", "securityContext", "ports"],
    },
    {
      name: "an unknown top-level spec field",
      spec: { podSpec: {} },
      path: ["spec", "podSpec"],
      message: ['unknown field "podSpec"; known fields: ', "profile", "metadata", "spec", "checks"],
    },
    {
      name: "allowNil on a non-pointer field (hostNetwork)",
      spec: { spec: { securityContext: { hostNetwork: { allowNil: true, require: false } } } },
      path: ["spec", "spec", "securityContext", "hostNetwork", "allowNil"],
      message: ["this field is not a pointer in the Pod API (unset reads as its zero value), so nil rules do not apply"],
    },
    {
      name: "forbidNil on a non-pointer field (imagePullPolicy)",
      spec: { spec: { containers: [{ imagePullPolicy: { forbidNil: true } }] } },
      path: ["spec", "spec", "containers", 0, "imagePullPolicy", "forbidNil"],
      message: ["not a pointer in the Pod API"],
    },
    {
      name: "allowNil on the pod securityContext (not a pointer)",
      spec: { spec: { securityContext: { allowNil: true } } },
      path: ["spec", "spec", "securityContext", "allowNil"],
      message: ['unknown field "allowNil"'],
    },
    {
      name: "a restriction that is not a mapping",
      spec: { spec: { containers: [{ securityContext: { privileged: false } }] } },
      path: ["spec", "spec", "containers", 0, "securityContext", "privileged"],
      message: ["must be a mapping, got false"],
    },
  ];
  for (const t of cases) {
    it(`${t.name} is a compile issue with its path`, () => {
      const r = compile(t.spec);
      assert.equal(r.policy, undefined);
      assert.equal(r.issues.length, 1, JSON.stringify(r.issues));
      assert.deepEqual(r.issues[0]!.path, t.path);
      for (const m of t.message) assert.ok(r.issues[0]!.message.includes(m), `${r.issues[0]!.message} should contain ${m}`);
    });
  }

  it("the hostPid/hostIpc spellings of the sketch are accepted", () => {
    const p = policy({ spec: { securityContext: { hostPid: { require: false }, hostIpc: { require: false } } } });
    assertFindings(findings(p, pod({ hostPID: true, hostIPC: true, containers: [c("a")] })), [
      { field: "spec.hostPID", message: "is true; must be false" },
      { field: "spec.hostIPC", message: "is true; must be false" },
    ]);
  });

  it("pointer struct fields accept allowNil (the seed's capabilities)", () => {
    const p = policy({
      spec: { containers: [{ securityContext: { allowNil: false, capabilities: { forbidNil: true, drop: { requiredValues: ["ALL"] } } } }] },
    });
    assertFindings(findings(p, pod({ containers: [c("a")] })), [{ field: "spec.containers[0].securityContext", message: "is unset; must be set" }]);
    assertFindings(findings(p, pod({ containers: [c("a", { securityContext: {} })] })), [
      { field: "spec.containers[0].securityContext.capabilities", message: "is unset; must be set" },
    ]);
    assertFindings(findings(p, pod({ containers: [c("a", { securityContext: { capabilities: { drop: ["NET_RAW"] } } })] })), [
      { field: "spec.containers[0].securityContext.capabilities.drop", message: 'must include "ALL"' },
    ]);
  });
});
