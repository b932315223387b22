// Edges of VolumeRestriction: which fields of volume sources and mounts are pointers in the Pod API (allowNil
// applies) and which read as their zero value (nil rules are a load error naming the field), the lowercase
// `mountpropagation` spelling, volumes that are not a list or not mappings, null sources, containers
// without volumeMounts, and the collection rules of an entry counting only the volumes it covers.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { APP, compileRestriction, fieldsOf, findingsFor, restrictionOf } from "./edge-support.ts";

const compile = (volumes: unknown) => compileRestriction({ spec: { volumes } });
const policy = (volumes: unknown) => restrictionOf({ spec: { volumes } });
const findings = findingsFor;
const app = APP;

describe("volume fields that are pointers: allowNil applies", () => {
  const pointers: Array<[string, string]> = [
    ["hostPath", "type"],
    ["csi", "readOnly"],
    ["mount", "mountPropagation"],
  ];
  for (const [source, field] of pointers) {
    it(`${source}.${field}`, () => {
      const p = policy({ [source]: { [field]: { allowNil: true } } });
      assert.deepEqual(findings(p, { containers: [app], volumes: [{ name: "v", hostPath: { path: "/data" } }] }), []);
    });
  }
});

describe("volume fields that are not pointers: nil rules are a load error", () => {
  const values = [
    ["mount"],
    ["mount", "readOnly"],
    ["mount", "subPath"],
    ["mount", "subPathExpr"],
    ["hostPath"],
    ["hostPath", "path"],
    ["csi"],
    ["csi", "driver"],
    ["flexVolume"],
    ["flexVolume", "driver"],
    ["flexVolume", "readOnly"],
    ["image"],
    ["image", "pullPolicy"],
  ];
  for (const path of values) {
    it(path.join("."), () => {
      const leaf = path.length === 1 ? { allowNil: true } : { [path[1]!]: { allowNil: true } };
      const r = compile({ [path[0]!]: leaf });
      assert.equal(r.policy, undefined);
      assert.deepEqual(
        r.issues.map((i) => i.path.join(".")),
        [["spec", "spec", "volumes", ...path, "allowNil"].join(".")],
      );
    });
  }
});

describe("type-specific fields are checked", () => {
  const cases: Array<{ source: string; restriction: Record<string, unknown>; volume: Record<string, unknown>; expect: string[] }> = [
    {
      source: "csi",
      restriction: { driver: { allowed: ["ok.csi"] } },
      volume: { driver: "bad.csi" },
      expect: ['spec.volumes[0].csi.driver: is "bad.csi"; allowed: "ok.csi"'],
    },
    {
      source: "flexVolume",
      restriction: { driver: { allowed: ["ok/flex"] } },
      volume: { driver: "bad/flex" },
      expect: ['spec.volumes[0].flexVolume.driver: is "bad/flex"; allowed: "ok/flex"'],
    },
    { source: "flexVolume", restriction: { readOnly: { require: true } }, volume: { driver: "x" }, expect: ["spec.volumes[0].flexVolume.readOnly"] },
    { source: "csi", restriction: { readOnly: { require: true } }, volume: { driver: "x" }, expect: ["spec.volumes[0].csi.readOnly"] },
    {
      source: "image",
      restriction: { pullPolicy: { allowed: ["Always"] } },
      volume: { reference: "registry.example.com/data:1" },
      expect: ['spec.volumes[0].image.pullPolicy: is ""; allowed: "Always"'],
    },
  ];
  for (const t of cases) {
    it(`${t.source}: ${Object.keys(t.restriction).join(", ")}`, () => {
      const p = policy({ [t.source]: t.restriction });
      const out = fieldsOf(findings(p, { containers: [app], volumes: [{ name: "v", [t.source]: t.volume }] }));
      assert.equal(out.length, t.expect.length, JSON.stringify(out));
      t.expect.forEach((e, i) => assert.ok(out[i]!.startsWith(e), `${out[i]} should start with ${e}`));
    });
  }
});

describe("mounts", () => {
  it("mountpropagation is accepted as a spelling of mountPropagation", () => {
    const p = policy({ mount: { mountpropagation: { allowNil: true, allowed: ["None"] } } });
    const volumes = [{ name: "v", emptyDir: {} }];
    const mounted = (mountPropagation: string) => ({ ...app, volumeMounts: [{ name: "v", mountPath: "/v", mountPropagation }] });
    assert.deepEqual(findings(p, { containers: [mounted("None")], volumes }), []);
    assert.deepEqual(fieldsOf(findings(p, { containers: [mounted("Bidirectional")], volumes })), [
      'spec.containers[0].volumeMounts[0].mountPropagation: is "Bidirectional"; allowed: "None"',
    ]);
  });

  it("containers without volumeMounts, or with other volumes' mounts, are not judged", () => {
    const p = policy({ mount: { readOnly: { require: true } } });
    const volumes = [{ name: "v", emptyDir: {} }];
    assert.deepEqual(findings(p, { containers: [app, { ...app, name: "b", volumeMounts: [{ name: "other", mountPath: "/o" }, "bad"] }], volumes }), []);
    assert.deepEqual(
      findings(p, { containers: [app, { ...app, name: "b", volumeMounts: [{ name: "v", mountPath: "/v" }] }], volumes }).map((f) => f.field),
      ["spec.containers[1].volumeMounts[0].readOnly"],
    );
  });
});

describe("volumes and their types", () => {
  it("volumes that are not a list are denied, naming what they are", () => {
    const p = policy({ volumeType: { allowed: ["configMap"] } });
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], volumes: { name: "v" } })), ['spec.volumes: must be a list, got {"name":"v"}']);
  });

  it("an entry that is not a mapping is a load error", () => {
    const r = compile(["configMap"]);
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path.join(".")),
      ["spec.spec.volumes.0"],
    );
  });

  it("a volumeType that is not a string list restriction is a load error naming it", () => {
    const r = compile({ volumeType: "configMap" });
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path.join(".")),
      ["spec.spec.volumes.volumeType"],
    );
  });

  it("a null source is skipped when finding a volume's type", () => {
    const p = policy({ volumeType: { allowed: ["emptyDir"] } });
    assert.deepEqual(findings(p, { containers: [app], volumes: [{ name: "v", hostPath: null, emptyDir: {} }] }), []);
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], volumes: [{ name: "v", hostPath: { path: "/" } }] })), [
      'spec.volumes[0].hostPath: volume type is "hostPath"; allowed: "emptyDir"',
    ]);
  });

  it("a volume that is not a mapping has no type", () => {
    const p = policy({ volumeType: { allowed: ["emptyDir"] } });
    const out = findings(p, { containers: [app], volumes: ["scratch"] });
    assert.equal(out.length, 1, JSON.stringify(out));
    assert.equal(out[0]!.field, "spec.volumes[0]", "the finding names the volume itself, with no trailing dot");
    assert.equal(out[0]!.message, 'volume type is ""; allowed: "emptyDir"');
  });

  it("an entry's collection rules count only the volumes it covers", () => {
    const p = policy([{ volumeType: { allowed: ["hostPath"] }, requireEmpty: true }, { volumeType: { allowed: ["configMap", "emptyDir"] } }]);
    assert.deepEqual(
      findings(p, {
        containers: [app],
        volumes: [
          { name: "c", configMap: { name: "c" } },
          { name: "e", emptyDir: {} },
        ],
      }),
      [],
    );
    const out = findings(p, {
      containers: [app],
      volumes: [
        { name: "c", configMap: { name: "c" } },
        { name: "h", hostPath: { path: "/" } },
      ],
    });
    assert.deepEqual(
      out.map((f) => f.field),
      ["spec.volumes"],
    );
  });

  it("requiredValues of volumeType count the types of the volumes covered", () => {
    const p = policy({ volumeType: { requiredValues: ["configMap"] } });
    assert.deepEqual(findings(p, { containers: [app], volumes: [{ name: "c", configMap: { name: "c" } }] }), []);
    assert.equal(findings(p, { containers: [app], volumes: [{ name: "e", emptyDir: {} }] }).length, 1);
  });
});

describe("a volume no entry covers, named in the finding", () => {
  it("a volume without a name (a manifest checked offline) is named unset", () => {
    const p = policy([{ volumeType: { allowed: ["configMap"] } }, { volumeType: { allowed: ["secret"] } }]);
    assert.deepEqual(fieldsOf(findings(p, { containers: [app], volumes: [{ emptyDir: {} }] })), [
      'spec.volumes[0]: volume unset has type "emptyDir", which no volume restriction allows',
    ]);
  });
});
