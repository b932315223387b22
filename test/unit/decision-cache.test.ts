import { test } from "node:test";
import assert from "node:assert/strict";
import { DecisionCache } from "../../src/backends/decision-cache.ts";
import { allow, deny } from "../../src/core/decision.ts";

const spec = { containers: [{ image: "nginx:1.25" }], annotations: {}, namespace: "team-a" };
const denied = deny([{ policy: "p", rule: "default", message: "no" }]);

test("allowed decisions live for allowTTL, denied ones for denyTTL", () => {
  let now = 1; // lru-cache treats a start time of 0 as "no start"
  const cache = new DecisionCache({ allowTtlMs: 3_600_000, denyTtlMs: 30_000 }, () => now);
  cache.set("scanner", spec, allow());
  cache.set("other", spec, denied);
  now = 29_001;
  assert.equal(cache.get("scanner", spec)?.allowed, true);
  assert.equal(cache.get("other", spec)?.allowed, false);
  now = 30_002;
  assert.equal(cache.get("other", spec), undefined, "denial expired after 30 s");
  assert.equal(cache.get("scanner", spec)?.allowed, true, "allow still cached");
  now = 3_600_002;
  assert.equal(cache.get("scanner", spec), undefined, "allow expired after 1 h");
});

test("the key is the review spec: annotation order does not matter, any other difference does", () => {
  const cache = new DecisionCache();
  cache.set("b", { ...spec, annotations: { "a.image-policy.k8s.io/x": "1", "b.image-policy.k8s.io/y": "2" } }, allow());
  assert.ok(cache.get("b", { ...spec, annotations: { "b.image-policy.k8s.io/y": "2", "a.image-policy.k8s.io/x": "1" } }));
  assert.equal(cache.get("b", { ...spec, annotations: { "a.image-policy.k8s.io/x": "1" } }), undefined);
  assert.equal(cache.get("b", { ...spec, namespace: "team-b" }), undefined);
  assert.equal(cache.get("b", { ...spec, containers: [{ image: "nginx:1.26" }] }), undefined);
  assert.equal(cache.get("c", spec), undefined, "per backend");
});

test("a zero TTL disables caching of that outcome, and clear() empties the cache", () => {
  const cache = new DecisionCache({ denyTtlMs: 0 });
  cache.set("b", spec, denied);
  assert.equal(cache.get("b", spec), undefined);
  cache.set("b", spec, allow());
  assert.equal(cache.size, 1);
  cache.clear();
  assert.equal(cache.get("b", spec), undefined);
  assert.equal(cache.hits, 0);
  assert.equal(cache.misses, 2);
});

test("the cache is bounded", () => {
  const cache = new DecisionCache({ maxEntries: 2 });
  for (const tag of ["1", "2", "3"]) cache.set("b", { ...spec, containers: [{ image: `nginx:${tag}` }] }, allow());
  assert.equal(cache.size, 2);
  assert.equal(cache.get("b", { ...spec, containers: [{ image: "nginx:1" }] }), undefined, "least recently used went first");
});
