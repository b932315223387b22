// One image verification's download budget across the client's calls: manifests, referrer lists and blobs take
// from one DownloadBudget as bytes arrive, so a declared size past it is refused before reading, a body with no
// (or a lying) Content-Length is cut off at the limit, and a mirror's spent budget is not spent again upstream.
import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import { DownloadBudget } from "../../../src/registry/download-budget.ts";
import { RegistryClient } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { FakeRegistry, imageManifest, sha256, testTls, type FakeRegistry as Registry, clientThroughMirror } from "./fake-registry.ts";
import { rejection } from "../../support/registry-rejection.ts";

const REPO = "team/app";
const BIG = Buffer.alloc(256 * 1024, "x");

async function setup(t: TestContext, intercept?: (req: IncomingMessage, res: ServerResponse, registry: Registry) => boolean) {
  const registry = await FakeRegistry.start({ https: true, ...(intercept ? { intercept } : {}) });
  const { caPem } = await testTls();
  const client = new RegistryClient({ settings: registrySettingsMap([{ host: registry.host, ca: caPem, allowLocalAddresses: true }]) });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  return { registry, client, repo: { registry: registry.host, repository: REPO } };
}

test("a blob whose Content-Length passes what is left of the budget is refused with code download-limit", async (t) => {
  const { client, repo, registry } = await setup(t);
  const digest = registry.putBlob(BIG);
  const budget = new DownloadBudget(100 * 1024);
  const e = await rejection(client.getBlob(repo, digest, { maxBytes: 1024 * 1024, budget }));
  assert.equal(e.code, "download-limit");
  assert.equal(e.retryable, false);
  assert.match(e.message, /limit of 102400 bytes read per image verification/);
  assert.equal(budget.remaining, 100 * 1024, "nothing was read");
});

test("a body without Content-Length is cut off at the budget, counted while reading", async (t) => {
  const digest = sha256(BIG);
  const { client, repo } = await setup(t, (req, res) => {
    if (!req.url?.includes("/blobs/")) return false;
    res.writeHead(200, { "content-type": "application/octet-stream" }); // chunked: no Content-Length
    res.write(BIG.subarray(0, 64 * 1024));
    setTimeout(() => res.end(BIG.subarray(64 * 1024)), 20);
    return true;
  });
  const budget = new DownloadBudget(100 * 1024);
  const e = await rejection(client.getBlob(repo, digest, { maxBytes: 1024 * 1024, budget }));
  assert.equal(e.code, "download-limit");
  assert.ok(budget.remaining >= 0);
});

test("calls sharing a budget: what one manifest read is not there for the next blob", async (t) => {
  const { client, repo, registry } = await setup(t);
  const manifest = imageManifest("m");
  const digest = registry.putManifest(REPO, "v1", manifest);
  const blob = registry.putBlob(Buffer.alloc(1000, "b"));
  const budget = new DownloadBudget(manifest.length + 999);
  assert.equal((await client.getManifest({ ...repo, digest }, { budget })).digest, digest);
  assert.equal(budget.remaining, 999);
  assert.equal((await rejection(client.getBlob(repo, blob, { budget }))).code, "download-limit");
  // Without a budget the same blob is read: the limit is the budget's, not the client's.
  assert.equal((await client.getBlob(repo, blob)).body.length, 1000);
});

test("a mirror that spends the budget is not followed by the registry", async (t) => {
  const origin = await FakeRegistry.start({ https: true });
  const mirror = await FakeRegistry.start({ https: true });
  const client = await clientThroughMirror(t, origin, mirror);
  const digest = origin.putBlob(BIG);
  mirror.putBlob(BIG);
  const e = await rejection(client.getBlob({ registry: origin.host, repository: REPO }, digest, { maxBytes: 1024 * 1024, budget: new DownloadBudget(1024) }));
  assert.equal(e.code, "download-limit");
  assert.equal(origin.registryRequests.length, 0);
});

test("a budget that is not a byte count is refused", () => {
  for (const limit of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])
    assert.throws(() => new DownloadBudget(limit), {
      name: "RegistryUsageError",
      code: "invalid-byte-count",
      message: `DownloadBudget: ${limit} is not a byte count`,
    });
  assert.equal(new DownloadBudget(0).remaining, 0);
});
