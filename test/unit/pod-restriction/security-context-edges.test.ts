// Edges of the security-context and struct restrictions: which fields are pointers in the Pod API (allowNil
// applies) and which read as their zero value (nil rules are a load error naming the field), struct values
// that are not objects, allowNil on a struct skipping its fields when absent, supplementalGroups that are not
// a list, and windowsOptions inherited from the pod field by field.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { APP, compileRestriction, fieldsOf, findingsFor, restrictionOf } from "./edge-support.ts";

const compile = (spec: unknown) => compileRestriction({ spec });
const policy = (spec: unknown) => restrictionOf({ spec });
const findings = findingsFor;
const app = APP;

/** `{a: {b: leaf}}` from ["a", "b"]. */
function nested(path: string[], leaf: unknown): Record<string, unknown> {
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), leaf) as Record<string, unknown>;
}

/** A restriction at `path`: paths starting with "containers" restrict the containers' security context. */
function at(path: string[], leaf: unknown): Record<string, unknown> {
  return path[0] === "containers" ? { containers: { securityContext: nested(path.slice(1), leaf) } } : { securityContext: nested(path, leaf) };
}

describe("security-context fields that are pointers: allowNil applies", () => {
  const pointers = [
    ["containers", "seccompProfile", "localhostProfile"],
    ["containers", "windowsOptions", "gmsaCredentialSpec"],
    ["containers", "readOnlyRootFilesystem"],
    ["containers", "runAsGroup"],
    ["runAsGroup"],
    ["shareProcessNamespace"],
  ];
  for (const path of pointers) {
    it(path.join("."), () => {
      const p = policy(at(path, { allowNil: true }));
      assert.deepEqual(findings(p, { containers: [app] }), []);
    });
  }

  it("an unset readOnlyRootFilesystem is unset, not false", () => {
    const p = policy(at(["containers", "readOnlyRootFilesystem"], { require: true }));
    const out = findings(p, { containers: [app] });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.containers[0].securityContext.readOnlyRootFilesystem"],
    );
    assert.ok(out[0]!.message.includes("unset"), out[0]!.message);
  });
});

describe("security-context fields that are not pointers: nil rules are a load error", () => {
  const values = [
    ["containers", "seccompProfile", "type"],
    ["containers", "seLinuxOptions", "user"],
    ["containers", "seLinuxOptions", "role"],
    ["containers", "seLinuxOptions", "type"],
    ["containers", "seLinuxOptions", "level"],
    ["hostIPC"],
  ];
  for (const path of values) {
    it(path.join("."), () => {
      const r = compile(at(path, { allowNil: true }));
      assert.equal(r.policy, undefined);
      assert.equal(r.issues.length, 1, JSON.stringify(r.issues));
      assert.ok(r.issues[0]!.message.includes("not a pointer in the Pod API"), r.issues[0]!.message);
      assert.equal(r.issues[0]!.path.at(-1), "allowNil");
      assert.equal(r.issues[0]!.path.at(-2), path.at(-1));
    });
  }

  it("supplementalGroups takes no nil rules", () => {
    const r = compile({ securityContext: { supplementalGroups: { allowNil: true, ranges: [{ min: 1000 }] } } });
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path.join(".")),
      ["spec.spec.securityContext.supplementalGroups.allowNil"],
    );
  });
});

describe("structs", () => {
  it("a struct restriction that is not a mapping is a load error naming it", () => {
    const r = compile({ containers: { livenessProbe: "required" } });
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path.join(".")),
      ["spec.spec.containers.livenessProbe"],
    );
  });

  it("a struct value that is not an object is denied, naming what it is", () => {
    const p = policy({ containers: { livenessProbe: { allowNil: true, exec: { allowNil: true } } } });
    assert.deepEqual(fieldsOf(findings(p, { containers: [{ ...app, livenessProbe: "yes" }] })), [
      'spec.containers[0].livenessProbe: must be an object, got "yes"',
    ]);
    const out = findings(p, { containers: [{ ...app, livenessProbe: [] }] });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.containers[0].livenessProbe"],
    );
    assert.ok(out[0]!.message.startsWith("must be an object"), out[0]!.message);
    assert.deepEqual(findings(p, { containers: [{ ...app, livenessProbe: null }] }), []);
  });

  it("allowNil on a struct admits it absent; present, its fields are checked", () => {
    const p = policy({ containers: { livenessProbe: { allowNil: true, exec: { forbidNil: true } } } });
    assert.deepEqual(findings(p, { containers: [app] }), []);
    assert.deepEqual(
      findings(p, { containers: [{ ...app, livenessProbe: { tcpSocket: { port: 80 } } }] }).map((f) => f.field),
      ["spec.containers[0].livenessProbe.exec"],
    );
    assert.deepEqual(findings(p, { containers: [{ ...app, livenessProbe: { exec: { command: ["true"] } } }] }), []);
  });

  it("without a nil rule, an absent struct's fields are checked as unset", () => {
    const p = policy({ containers: { livenessProbe: { exec: { forbidNil: true } } } });
    assert.deepEqual(
      findings(p, { containers: [app] }).map((f) => f.field),
      ["spec.containers[0].livenessProbe.exec"],
    );
  });
});

describe("supplementalGroups", () => {
  const p = policy({ securityContext: { supplementalGroups: { ranges: [{ min: 1000 }] } } });

  it("each group is checked; absent or null groups pass", () => {
    assert.deepEqual(findings(p, { containers: [app] }), []);
    assert.deepEqual(findings(p, { containers: [app], securityContext: { supplementalGroups: null } }), []);
    assert.deepEqual(findings(p, { containers: [app], securityContext: { supplementalGroups: [1000, 2000] } }), []);
    assert.deepEqual(
      findings(p, { containers: [app], securityContext: { supplementalGroups: [1000, 0] } }).map((f) => f.field),
      ["spec.securityContext.supplementalGroups[1]"],
    );
  });

  it("groups that are not a list are denied, naming what they are", () => {
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], securityContext: { supplementalGroups: 1000 } })), [
      "spec.securityContext.supplementalGroups: must be a list, got 1000",
    ]);
  });
});

describe("structs inherited from the pod", () => {
  it("an unset non-pointer field of an inherited seLinuxOptions reads as empty, and says where it was set", () => {
    const p = policy({ containers: { securityContext: { seLinuxOptions: { allowNil: true, level: { allowed: ["s0"] } } } } });
    const out = fieldsOf(findings(p, { securityContext: { seLinuxOptions: { user: "system_u" } }, containers: [app] }));
    assert.equal(out.length, 1, JSON.stringify(out));
    assert.ok(out[0]!.startsWith('spec.securityContext.seLinuxOptions.level: is ""; allowed: "s0"'), out[0]);
    assert.ok(out[0]!.includes("set at pod level, effective for spec.containers[0]"), out[0]);
  });
});

describe("windowsOptions inherited from the pod", () => {
  const p = policy({ containers: { securityContext: { windowsOptions: { allowNil: true, runAsUserName: { allowNil: true, allowed: ["ContainerUser"] } } } } });

  it("a container without windowsOptions takes the pod's, and the finding says so", () => {
    const out = findings(p, { securityContext: { windowsOptions: { runAsUserName: "ContainerAdministrator" } }, containers: [app] });
    assert.equal(out.length, 1, JSON.stringify(out));
    assert.ok(out[0]!.message.includes("set at pod level"), out[0]!.message);
  });

  it("a container's windowsOptions without the field still takes the pod's value for it", () => {
    const out = findings(p, {
      securityContext: { windowsOptions: { runAsUserName: "ContainerAdministrator" } },
      containers: [{ ...app, securityContext: { windowsOptions: { hostProcess: false } } }],
    });
    assert.equal(out.length, 1, JSON.stringify(out));
    assert.ok(out[0]!.message.includes("set at pod level"), out[0]!.message);
  });

  it("with windowsOptions set nowhere, the container's own absence is reported, not the pod's", () => {
    const required = policy({ containers: { securityContext: { windowsOptions: { forbidNil: true } } } });
    const out = findings(required, { containers: [{ ...app, securityContext: { runAsNonRoot: true } }] });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.containers[0].securityContext.windowsOptions"],
    );
    assert.ok(!out[0]!.message.includes("pod level"), out[0]!.message);
  });

  it("a container's own value wins over the pod's", () => {
    const spec = {
      securityContext: { windowsOptions: { runAsUserName: "ContainerAdministrator" } },
      containers: [{ ...app, securityContext: { windowsOptions: { runAsUserName: "ContainerUser" } } }],
    };
    assert.deepEqual(findings(p, spec), []);
  });

  it("the GMSA pair is inherited together: a container setting one does not take the other from the pod", () => {
    const gmsa = policy({ containers: { securityContext: { windowsOptions: { allowNil: true, gmsaCredentialSpec: { allowNil: true, allowed: ["ok"] } } } } });
    const spec = {
      securityContext: { windowsOptions: { gmsaCredentialSpec: "pod-spec" } },
      containers: [{ ...app, securityContext: { windowsOptions: { gmsaCredentialSpecName: "mine" } } }],
    };
    assert.deepEqual(findings(gmsa, spec), []);
    const inherits = { ...spec, containers: [{ ...app, securityContext: { windowsOptions: { hostProcess: false } } }] };
    assert.equal(findings(gmsa, inherits).length, 1);
  });
});

describe("sysctls without a name", () => {
  it('are the name "" to an allowed list, as to Pod Security Admission, and are reported at their entry', () => {
    const p = policy({ securityContext: { sysctls: { allowedKeys: ["kernel.shm_rmid_forced"] } } });
    const out = fieldsOf(findings(p, { securityContext: { sysctls: [{ name: "kernel.shm_rmid_forced", value: "1" }, { value: "1" }] }, containers: [app] }));
    assert.equal(out.length, 1, out.join("\n"));
    assert.match(out[0]!, /^spec\.securityContext\.sysctls\[1\]\.name: /);
    assert.match(out[0]!, /""/);
    assert.doesNotMatch(out[0]!, /undefined|Stryker/);
  });
});
