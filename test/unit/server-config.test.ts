import { test } from "node:test";
import assert from "node:assert/strict";
import { parseServerConfig, DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { renderMutatingWebhookConfiguration } from "../../src/server/webhook-manifests.ts";
import { parse } from "yaml";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../src/config/config-error.ts";
import { loadServerConfig } from "../../src/config/server-config.ts";

const head = { apiVersion: "imprimatur.dev/v1alpha1", kind: "ServerConfig" };

test("registries, authFile and digests are read, with paths relative to the config's folder", () => {
  const c = parseServerConfig(
    { ...head, registries: "registries.yaml", authFile: "/etc/imprimatur/auth.json", digests: { mode: "Record", cacheTTL: "2m", maxEntries: 50 } },
    "c.yaml",
    "/srv/conf",
  );
  assert.equal(c.registries, "/srv/conf/registries.yaml");
  assert.equal(c.authFile, "/etc/imprimatur/auth.json");
  assert.deepEqual(c.digests, { mode: "record", cacheTtlMs: 120_000, cacheMaxEntries: 50 });
  assert.deepEqual(parseServerConfig(head, "c.yaml", "/").digests, DEFAULT_SERVER_CONFIG.digests);
  assert.equal(DEFAULT_SERVER_CONFIG.digests.mode, "mutate");
});

test("digest settings are validated with the field path in the message", () => {
  const bad: Array<[unknown, RegExp]> = [
    [{ mode: "Pin" }, /^c\.yaml \(digests\.mode\): must be "Mutate".*or "Record"/],
    [{ cacheTTL: "soon" }, /^c\.yaml \(digests\.cacheTTL\): must be a duration/],
    [{ maxEntries: 0 }, /^c\.yaml \(digests\.maxEntries\): must be a positive integer/],
    [{ ttl: "1m" }, /^c\.yaml \(digests\.ttl\): unknown field/],
    ["Mutate", /^c\.yaml \(digests\): must be a mapping/],
  ];
  for (const [digests, message] of bad)
    assert.throws(() => parseServerConfig({ ...head, digests }, "c.yaml", "/"), { name: "ConfigError", code: "invalid-config", message });
  assert.throws(() => parseServerConfig({ ...head, registries: "" }, "c.yaml", "/"), { message: /^c\.yaml \(registries\): must be a file path/ });
});

test("the mutating webhook configuration calls /mutate for pods and workloads, reinvoked if needed", () => {
  const doc = parse(
    renderMutatingWebhookConfiguration(
      { baseUrl: "https://imprimatur.svc:8443", caPem: "PEM" },
      { customResources: [{ group: "ci.example.com", version: "v1", resource: "buildruns" }] },
    ),
  );
  assert.equal(doc.kind, "MutatingWebhookConfiguration");
  const [hook] = doc.webhooks;
  assert.equal(hook.clientConfig.url, "https://imprimatur.svc:8443/mutate");
  assert.equal(hook.reinvocationPolicy, "IfNeeded");
  assert.equal(hook.sideEffects, "NoneOnDryRun");
  assert.deepEqual(
    hook.rules.flatMap((r: { resources: string[] }) => r.resources),
    [
      "pods",
      "pods/ephemeralcontainers",
      "replicationcontrollers",
      "podtemplates",
      "deployments",
      "replicasets",
      "statefulsets",
      "daemonsets",
      "jobs",
      "cronjobs",
      "buildruns",
    ],
  );
});

test("a config file reports every problem at once, each as file:line (field): message, in line order", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-server-config-"));
  try {
    const file = join(dir, "config.yaml");
    await writeFile(
      file,
      [
        "apiVersion: imprimatur.dev/v1alpha1",
        "kind: ServerConfig",
        "failurePolicy: Maybe",
        "cache:",
        "  allowTTL: soon",
        "  maxEntries: 0",
        "backends:",
        "  - name: Bad_Name",
        "    kubeconfig: backend.kubeconfig",
        "    timeot: 5s",
        "  - name: ok",
        "digests: [Mutate]",
        "podTemplates:",
        "  - apiVersion: ci.example.com/v1",
        "    kind: buildRun",
        "    resource: buildruns",
        "maxRequestBytes: 10",
        "surprise: true",
        "",
      ].join("\n"),
    );
    await assert.rejects(loadServerConfig(file), (e: ConfigError) => {
      assert.ok(e instanceof ConfigError);
      assert.equal(e.code, "invalid-config");
      assert.deepEqual(
        e.problems.map((p) => `${p.line} ${p.path}`),
        [
          "3 failurePolicy",
          "5 cache.allowTTL",
          "6 cache.maxEntries",
          "8 backends[0].name",
          "10 backends[0].timeot",
          "11 backends[1].kubeconfig",
          "12 digests",
          "14 podTemplates[0]",
          "15 podTemplates[0].kind",
          "17 maxRequestBytes",
          "18 surprise",
        ],
      );
      const lines = e.message.split("\n");
      assert.equal(lines.length, 11);
      assert.equal(lines[0], `${file}:3 (failurePolicy): must be "Fail" (deny when a backend is unreachable) or "Ignore" (admit)`);
      assert.equal(lines[10], `${file}:18 (surprise): unknown field`);
      return true;
    });
    await writeFile(file, "apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\ncache: {allowTTL: 1m, allowTTL: 2m}\n");
    await assert.rejects(loadServerConfig(file), { code: "invalid-config", message: `${file}:3: not valid YAML: duplicate key "allowTTL" (first on line 3)` });
    await assert.rejects(loadServerConfig(join(dir, "missing.yaml")), {
      code: "unreadable",
      message: `${join(dir, "missing.yaml")}: cannot read config: ENOENT`,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a valid config file loads with its paths relative to its folder", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-server-config-"));
  try {
    const file = join(dir, "config.yaml");
    await writeFile(
      file,
      "apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\nfailurePolicy: Ignore\nbackends: [{name: corp, kubeconfig: corp.kubeconfig, timeout: 2s}]\ncache: {denyTTL: 1m}\n",
    );
    const c = await loadServerConfig(file);
    assert.equal(c.failOpen, true);
    assert.deepEqual(c.backends, [{ name: "corp", kubeconfig: join(dir, "corp.kubeconfig"), timeoutMs: 2000 }]);
    assert.equal(c.denyTtlMs, 60_000);
    assert.equal(c.allowTtlMs, DEFAULT_SERVER_CONFIG.allowTtlMs);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
