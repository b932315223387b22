// The namespaces file: a map of namespace → labels, or Namespace objects, in one or more YAML documents.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/config/config-error.ts";
import { loadNamespacesFile } from "../../src/config/namespaces-file.ts";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-namespaces-"));
});
after(() => rm(dir, { recursive: true, force: true }));

let counter = 0;
async function file(yaml: string): Promise<string> {
  const path = join(dir, `namespaces-${++counter}.yaml`);
  await writeFile(path, yaml);
  return path;
}

test("a map of labels and Namespace objects (kubectl get ns -o yaml) across documents", async () => {
  const source = await loadNamespacesFile(
    await file(`team-a: {tier: prod}
empty: {}
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Namespace
    metadata:
      name: team-b
      uid: 0a1b
      labels: {tier: dev}
    spec: {finalizers: [kubernetes]}
    status: {phase: Active}
---
apiVersion: v1
kind: Namespace
metadata: {name: bare}
`),
  );
  assert.deepEqual(source.labels("team-a"), { "kubernetes.io/metadata.name": "team-a", tier: "prod" });
  assert.deepEqual(source.labels("empty"), { "kubernetes.io/metadata.name": "empty" });
  assert.deepEqual(source.labels("team-b"), { "kubernetes.io/metadata.name": "team-b", tier: "dev" });
  assert.deepEqual(source.labels("bare"), { "kubernetes.io/metadata.name": "bare" });
  assert.equal(source.labels("other"), undefined);
  assert.equal((await loadNamespacesFile(await file(""))).labels("x"), undefined);
});

test("every problem is reported at once with its line, across documents", async () => {
  const path = await file(`team-a: {tier: prod, replicas: 3}
team-b: prod
---
kind: NamespaceList
items:
  - kind: Namespace
    metadata: {labels: {a: b}}
  - kind: Namespace
    metadata:
      name: ok
      labels:
        enabled: true
---
just a string
---
kind: ConfigMap
data: {}
`);
  await assert.rejects(loadNamespacesFile(path), (e: ConfigError) => {
    assert.ok(e instanceof ConfigError);
    assert.equal(e.code, "invalid-config");
    assert.deepEqual(
      e.problems.map((p) => [p.line, p.path, p.message]),
      [
        [1, "team-a.replicas", "label value must be a string, got 3; quote it"],
        [2, "team-b", 'labels of namespace "team-b" must be a map'],
        [7, "items[0].metadata.name", "a Namespace needs metadata.name"],
        [12, "items[1].metadata.labels.enabled", "label value must be a string, got true; quote it"],
        [14, undefined, "expected a map of namespace → labels or Namespace objects"],
        [16, "kind", 'is "ConfigMap"; expected Namespace, NamespaceList or List (or a map of namespace → labels)'],
      ],
    );
    assert.ok(e.message.startsWith(`${path}:1 (team-a.replicas): label value must be a string`), e.message);
    return true;
  });
});

test("unreadable files and YAML errors name the file", async () => {
  const missing = join(dir, "missing.yaml");
  await assert.rejects(loadNamespacesFile(missing), { code: "unreadable", message: `${missing}: cannot read namespaces file: ENOENT` });
  const broken = await file("a: {b: c}\n---\nx: [\n");
  await assert.rejects(
    loadNamespacesFile(broken),
    (e: ConfigError) => e.code === "invalid-config" && e.message.startsWith(`${broken}:`) && e.message.includes("not valid YAML"),
  );
});
