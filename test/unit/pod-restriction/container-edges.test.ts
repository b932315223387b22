// Edges of ContainerRestriction: which container fields are pointers in the Pod API (probes, lifecycle
// handlers and their actions: allowNil applies) and which read as their zero value (nil rules are a load
// error naming the field), `ports` given as something other than a list, collection rules alone, and empty
// lists of alternatives.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { APP, compileRestriction, fieldsOf, findingsFor, restrictionOf } from "./edge-support.ts";

const compile = (spec: unknown) => compileRestriction(spec);
const policy = (spec: unknown) => restrictionOf(spec);
const findings = findingsFor;
const app = APP;

/** `{a: {b: leaf}}` from ["a", "b"]. */
function nested(path: string[], leaf: unknown): unknown {
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), leaf);
}

describe("container fields that are pointers: allowNil applies", () => {
  const pointers = [
    ["livenessProbe"],
    ["readinessProbe", "httpGet"],
    ["startupProbe", "tcpSocket"],
    ["livenessProbe", "exec"],
    ["livenessProbe", "grpc"],
    ["livenessProbe", "grpc", "service"],
    ["lifecycle"],
    ["lifecycle", "postStart"],
    ["lifecycle", "preStop", "sleep"],
  ];
  for (const path of pointers) {
    it(`${path.join(".")} accepts allowNil, and a container without it is admitted`, () => {
      const p = policy({ spec: { containers: nested(path, { allowNil: true }) } });
      assert.deepEqual(findings(p, { containers: [app] }), []);
    });
  }

  it("a probe that must be set denies a container without it, naming the field", () => {
    const p = policy({ spec: { containers: { livenessProbe: { forbidNil: true } } } });
    const out = findings(p, { containers: [app] });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.containers[0].livenessProbe"],
    );
    assert.deepEqual(findings(p, { containers: [{ ...app, livenessProbe: { exec: { command: ["true"] } } }] }), []);
  });
});

describe("container fields that are not pointers: nil rules are a load error", () => {
  const values = [
    ["name"],
    ["livenessProbe", "httpGet", "host"],
    ["livenessProbe", "httpGet", "scheme"],
    ["livenessProbe", "httpGet", "path"],
    ["readinessProbe", "tcpSocket", "host"],
    ["lifecycle", "preStop", "sleep", "seconds"],
    ["ports", "containerPort"],
    ["ports", "hostIP"],
    ["ports", "protocol"],
    ["ports", "name"],
  ];
  for (const path of values) {
    it(`${path.join(".")}`, () => {
      const r = compile({ spec: { containers: nested(path, { allowNil: true }) } });
      assert.equal(r.policy, undefined);
      assert.deepEqual(
        r.issues.map((i) => [i.path.join("."), i.message.includes("not a pointer in the Pod API")]),
        [[["spec", "spec", "containers", ...path, "allowNil"].join("."), true]],
      );
    });
  }

  it("a container restriction itself takes no nil rules", () => {
    const r = compile({ spec: { containers: { allowNil: true } } });
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path.join(".")),
      ["spec.spec.containers.allowNil"],
    );
  });

  it("an unset httpGet path reads as the empty string", () => {
    const p = policy({ spec: { containers: { livenessProbe: { allowNil: true, httpGet: { allowNil: true, path: { allowed: ["/healthz"] } } } } } });
    const probe = { httpGet: { port: 8080 } };
    assert.deepEqual(fieldsOf(findings(p, { containers: [{ ...app, livenessProbe: probe }] })), [
      'spec.containers[0].livenessProbe.httpGet.path: is ""; allowed: "/healthz"',
    ]);
  });
});

describe("ports", () => {
  it("a ports restriction that is not a mapping is a load error", () => {
    const r = compile({ spec: { containers: { ports: "none" } } });
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path.join(".")),
      ["spec.spec.containers.ports"],
    );
  });

  it("ports that are not a list are denied, naming the field and what they are", () => {
    const p = policy({ spec: { containers: { ports: { hostPort: { ranges: [{ min: 0, max: 0 }] } } } } });
    assert.deepEqual(fieldsOf(findings(p, { containers: [{ ...app, ports: "8080" }] })), ['spec.containers[0].ports: must be a list, got "8080"']);
    assert.deepEqual(findings(p, { containers: [app] }), []);
  });

  it("collection rules alone: requireEmpty denies a container with ports, admits one without", () => {
    const p = policy({ spec: { containers: { ports: { requireEmpty: true } } } });
    assert.deepEqual(findings(p, { containers: [app] }), []);
    const out = findings(p, { containers: [{ ...app, ports: [{ containerPort: 80 }] }] });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.containers[0].ports"],
    );
  });

  it("a host port outside the allowed ranges is denied, naming the port", () => {
    const p = policy({ spec: { containers: { ports: { hostPort: { ranges: [{ min: 0, max: 0 }] } } } } });
    assert.deepEqual(findings(p, { containers: [{ ...app, ports: [{ containerPort: 80 }] }] }), []);
    const out = findings(p, { containers: [{ ...app, ports: [{ containerPort: 80 }, { containerPort: 81, hostPort: 81 }] }] });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.containers[0].ports[1].hostPort"],
    );
  });
});

describe("empty lists of alternatives restrict nothing", () => {
  it("containers: [] admits any container", () => {
    const p = policy({ spec: { containers: [] } });
    assert.deepEqual(findings(p, { containers: [{ ...app, securityContext: { privileged: true } }] }), []);
  });

  it("initContainers: [] opts init containers out of the containers restrictions", () => {
    const p = policy({ spec: { containers: { securityContext: { privileged: { allowNil: true, require: false } } }, initContainers: [] } });
    const privileged = { ...app, securityContext: { privileged: true } };
    assert.deepEqual(findings(p, { containers: [app], initContainers: [privileged] }), []);
    assert.deepEqual(
      findings(p, { containers: [privileged] }).map((f) => f.field),
      ["spec.containers[0].securityContext.privileged"],
    );
  });
});
