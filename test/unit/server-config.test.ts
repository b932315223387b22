import { test } from "node:test";
import assert from "node:assert/strict";
import { parseServerConfig, DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { renderMutatingWebhookConfiguration } from "../../src/server/webhook-manifests.ts";
import { parse } from "yaml";

const head = { apiVersion: "imprimatur.dev/v1alpha1", kind: "ServerConfig" };

test("registries, authFile and digests are read, with paths relative to the config's folder", () => {
  const c = parseServerConfig({ ...head, registries: "registries.yaml", authFile: "/etc/imprimatur/auth.json", digests: { mode: "Record", cacheTTL: "2m", maxEntries: 50 } }, "c.yaml", "/srv/conf");
  assert.equal(c.registries, "/srv/conf/registries.yaml");
  assert.equal(c.authFile, "/etc/imprimatur/auth.json");
  assert.deepEqual(c.digests, { mode: "record", cacheTtlMs: 120_000, cacheMaxEntries: 50 });
  assert.deepEqual(parseServerConfig(head, "c.yaml", "/").digests, DEFAULT_SERVER_CONFIG.digests);
  assert.equal(DEFAULT_SERVER_CONFIG.digests.mode, "mutate");
});

test("digest settings are validated with the field path in the message", () => {
  const bad: Array<[unknown, RegExp]> = [
    [{ mode: "Pin" }, /c\.yaml: digests\.mode: must be "Mutate".*or "Record"/],
    [{ cacheTTL: "soon" }, /digests\.cacheTTL: must be a duration/],
    [{ maxEntries: 0 }, /digests\.maxEntries: must be a positive integer/],
    [{ ttl: "1m" }, /digests\.ttl: unknown field/],
    ["Mutate", /digests: must be a mapping/],
  ];
  for (const [digests, message] of bad) assert.throws(() => parseServerConfig({ ...head, digests }, "c.yaml", "/"), message);
  assert.throws(() => parseServerConfig({ ...head, registries: "" }, "c.yaml", "/"), /registries: must be a file path/);
});

test("the mutating webhook configuration calls /mutate for pods and workloads, reinvoked if needed", () => {
  const doc = parse(renderMutatingWebhookConfiguration({ baseUrl: "https://imprimatur.svc:8443", caPem: "PEM" }, { customResources: [{ group: "ci.example.com", version: "v1", resource: "buildruns" }] }));
  assert.equal(doc.kind, "MutatingWebhookConfiguration");
  const [hook] = doc.webhooks;
  assert.equal(hook.clientConfig.url, "https://imprimatur.svc:8443/mutate");
  assert.equal(hook.reinvocationPolicy, "IfNeeded");
  assert.equal(hook.sideEffects, "NoneOnDryRun");
  assert.deepEqual(hook.rules.flatMap((r: { resources: string[] }) => r.resources), ["pods", "pods/ephemeralcontainers", "replicationcontrollers", "podtemplates", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs", "buildruns"]);
});
