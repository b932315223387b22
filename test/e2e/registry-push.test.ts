// Pushing an OCI layout with Imprimatur's own registry client (src/image-build/push-layout.ts, RegistryClient's
// pushBlob/pushManifest), against real docker-registry instances: token auth with a user that may push and one
// that may only pull, and htpasswd. What was pushed is read back with skopeo (another client): the same digest.
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { CredentialKeyring } from "../../src/credentials/keyring.ts";
import { pushLayout } from "../../src/image-build/push-layout.ts";
import { RegistryClient } from "../../src/registry/registry-client.ts";
import { RegistryError } from "../../src/registry/registry-error.ts";
import { registrySettingsMap } from "../../src/registry/registry-settings.ts";
import { buildOciLayout, type OciLayout } from "../support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { teardown } from "../support/teardown.ts";

const PUSHER = { username: "pusher", password: "pusher-Secret-5be1" };
const READER = { username: "reader", password: "reader-Secret-77aa" };

let token: TestRegistry;
let htpasswd: TestRegistry;
const single: OciLayout = buildOciLayout({ tag: "v1", seed: "registry-push single" });
const multi: OciLayout = buildOciLayout({
  tag: "v1",
  seed: "registry-push multi",
  platforms: [
    { os: "linux", architecture: "amd64" },
    { os: "linux", architecture: "arm64", variant: "v8" },
  ],
});

before(async () => {
  [token, htpasswd] = await Promise.all([
    startRegistry({ auth: "token", users: [PUSHER, { ...READER, pull: ["**"], push: false }] }),
    startRegistry({ auth: "htpasswd" }),
  ]);
});
after(() =>
  teardown([
    () => token?.stop(),
    () => htpasswd?.stop(),
    () => rmSync(single.layoutDir, { recursive: true, force: true }),
    () => rmSync(multi.layoutDir, { recursive: true, force: true }),
  ]),
);

function clientFor(registry: TestRegistry, user: { username: string; password: string }): RegistryClient {
  return new RegistryClient({
    settings: registrySettingsMap(registry.settings()),
    credentials: CredentialKeyring.of([{ key: registry.host, credential: { source: "test", ...user } }]).lookup,
  });
}

test("an image and a multi-platform index pushed with the token service's push scope read back with the same digests; a second push sends no blob", async (t) => {
  const client = clientFor(token, PUSHER);
  t.after(() => client.close());
  const target = { registry: token.host, repository: "team/app" };

  const first = await pushLayout(client, single.layoutDir, single.tag, target, "1.0");
  assert.equal(first.digest, single.digest);
  assert.equal(first.uploadedBlobs, 2, "the config and the layer");
  assert.equal((await token.inspectRaw("team/app", "1.0")).digest, single.digest, "skopeo reads what was pushed");

  const again = await pushLayout(client, single.layoutDir, single.tag, target, "1.0-again");
  assert.deepEqual({ uploaded: again.uploadedBlobs, reused: again.reusedBlobs }, { uploaded: 0, reused: 2 });
  assert.equal((await token.inspectRaw("team/app", "1.0-again")).digest, single.digest);

  const index = await pushLayout(client, multi.layoutDir, multi.tag, target, "multi");
  assert.equal(index.digest, multi.digest);
  const read = await token.inspectRaw("team/app", "multi");
  assert.equal(read.digest, multi.digest);
  for (const platform of multi.manifests) {
    assert.equal((await token.inspectRaw("team/app", platform.digest)).digest, platform.digest, "each platform's manifest is there by digest");
  }
});

test("a user the token service lets pull but not push is refused with code unauthorized, and the tag is not written", async (t) => {
  const client = clientFor(token, READER);
  t.after(() => client.close());
  await assert.rejects(
    pushLayout(client, single.layoutDir, single.tag, { registry: token.host, repository: "refused/app" }, "1.0"),
    (e: unknown) => e instanceof RegistryError && e.code === "unauthorized" && e.message.includes(token.host),
  );
  const after = token.accessLog().filter((a) => a.path.startsWith("/v2/refused/app/manifests/") && a.method === "PUT");
  assert.ok(
    after.every((a) => a.status >= 400),
    `no manifest PUT succeeded: ${JSON.stringify(after)}`,
  );
});

test("htpasswd: the right password pushes; a wrong one is refused before any blob is sent", async (t) => {
  const good = clientFor(htpasswd, { username: htpasswd.username, password: htpasswd.password });
  const bad = clientFor(htpasswd, { username: htpasswd.username, password: "wrong" });
  t.after(() => Promise.all([good.close(), bad.close()]));
  const target = { registry: htpasswd.host, repository: "basic/app" };
  assert.equal((await pushLayout(good, single.layoutDir, single.tag, target, "v1")).digest, single.digest);
  const before = htpasswd.accessLog().length;
  await assert.rejects(
    pushLayout(bad, single.layoutDir, single.tag, { registry: htpasswd.host, repository: "basic/other" }, "v1"),
    (e: unknown) => e instanceof RegistryError && e.code === "unauthorized",
  );
  const sent = htpasswd
    .accessLog()
    .slice(before)
    .filter((a) => a.method === "PUT" || a.method === "POST");
  assert.ok(
    sent.every((a) => a.status === 401),
    `every write was refused: ${JSON.stringify(sent)}`,
  );
});

test("a layout whose blob was changed on disk is refused before anything is sent", async (t) => {
  const client = clientFor(token, PUSHER);
  t.after(() => client.close());
  const broken = buildOciLayout({ tag: "v1", seed: "registry-push broken" });
  t.after(() => rmSync(broken.layoutDir, { recursive: true, force: true }));
  const [alg, hex] = broken.manifests[0]!.layerDigest.split(":") as [string, string];
  writeFileSync(`${broken.layoutDir}/blobs/${alg}/${hex}`, "not the layer");
  await assert.rejects(
    pushLayout(client, broken.layoutDir, broken.tag, { registry: token.host, repository: "broken/app" }, "v1"),
    (e: unknown) => (e as { code?: string }).code === "layout" && /does not match its descriptor/.test((e as Error).message),
  );
  assert.deepEqual(
    token.accessLog().filter((a) => a.path.startsWith("/v2/broken/app/")),
    [],
    "nothing was sent, not even the intact config blob",
  );
});
