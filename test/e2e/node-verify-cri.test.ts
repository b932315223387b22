// Verification at pull time through `imprimatur node-proxy --policies`, spoken to over CRI as the kubelet speaks
// (test/support/kubelet-cri.ts), in front of a real containerd pulling from a real docker-registry (TLS, htpasswd)
// that holds images signed by the project's test signer. What the node enforces that admission cannot: a pull is
// judged at the digest it resolves to and the runtime pulls that digest; an image already on the node is used only
// once verified under the policies in force. The path through a real kubelet is test/e2e/node-verify-kubelet.test.ts.
import assert from "node:assert/strict";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { decodePullImageResponse, encodePullImageRequest } from "../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";
import { imprimatur as runCli } from "../support/cli-process.ts";
import { criPull, criPullError, criStatus, kubeletAnnotations, kubeletSandbox, pullImageRequest } from "../support/kubelet-cri.ts";
import { startNodeProxy, type NodeProxyProcess } from "../support/node-proxy-process.ts";
import { startNodeRuntime, type NodeRuntime } from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { writeSignedOnlyFolder } from "../support/node-signing-policies.ts";
import { teardown } from "../support/teardown.ts";

let dir: string;
let registry: TestRegistry;
let node: NodeRuntime;
let containerd: RuntimeImageClient;
let sigstore: MockSigstore;
let key: SigningKey;
const proxies: NodeProxyProcess[] = [];
const clients: RuntimeImageClient[] = [];
const layouts: string[] = [];
let registriesFile: string;
let seeds = 0;

/** Builds a runnable image, pushes it as repository:tag, signs it when asked; its manifest digest. */
async function push(repository: string, tag: string, signed: boolean): Promise<string> {
  const built = buildRunnableImage({ tag, seed: `node-verify-${repository}-${tag}-${seeds++}` });
  layouts.push(built.layoutDir);
  await registry.push(built.layoutDir, tag, repository, tag);
  if (signed) await pushCosignSignatures({ registry, repository, digest: built.digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });
  return built.digest;
}

/** A policy folder: the mock's trust root, and images of the registry allowed when signed by `key`. */
function policyFolder(name: string, extra: Record<string, unknown>[] = []): Promise<string> {
  return writeSignedOnlyFolder(join(dir, name), { sigstore, key, images: [`${registry.host}/*`], extra });
}

/**
 * A verifying proxy. The credential check of KEP-2535 is off (NeverVerify) unless `args` set it: images here are
 * pulled with a credential, and that check would make every other pod pull too, which is not what is tested here.
 */
async function proxy(stateDir: string, args: string[]): Promise<{ p: NodeProxyProcess; client: RuntimeImageClient }> {
  const withPolicy = args.includes("--verification-policy") ? args : [...args, "--verification-policy", "NeverVerify"];
  const p = await startNodeProxy({ dir: await mkdtemp(join(dir, "proxy-")), stateDir, runtimeEndpoint: node.containerdEndpoint, args: withPolicy });
  proxies.push(p);
  const client = new RuntimeImageClient(p.endpoint);
  clients.push(client);
  return { p, client };
}

async function stop(p: NodeProxyProcess): Promise<void> {
  await p.stop();
}

const status = criStatus;
const pull = (client: RuntimeImageClient, image: string, pod: string) =>
  criPull(client, image, pod, { username: registry.username, password: registry.password });

async function refusal(client: RuntimeImageClient, image: string, pod: string): Promise<grpc.ServiceError> {
  return criPullError(client, image, pod, { username: registry.username, password: registry.password });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-node-verify-"));
  sigstore = await createMockSigstore({ name: "node-verify" });
  key = generateSigningKey("ecdsa-p256");
  registry = await startRegistry({ auth: "htpasswd" });
  registriesFile = join(dir, "registries.yaml");
  await writeFile(registriesFile, registry.registryConfig());
  node = await startNodeRuntime({ registries: [{ host: registry.host, caFile: registry.caFile }] });
  containerd = new RuntimeImageClient(node.containerdEndpoint);
});

after(() =>
  teardown([
    ...clients.map((c) => () => c.close()),
    () => containerd?.close(),
    ...proxies.map((p) => () => p.stop()),
    () => node?.stop(),
    () => registry?.stop(),
    ...layouts.map((l) => () => rm(l, { recursive: true, force: true })),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

describe("node-proxy --policies", () => {
  test("a signed tag is verified and pulled by its digest; the tag is then found as the image verified", async () => {
    const digest = await push("apps/signed", "v1", true);
    const image = `${registry.host}/apps/signed:v1`;
    const { p, client } = await proxy(join(dir, "state-signed"), ["--policies", await policyFolder("signed"), "--registries", registriesFile]);
    const imageRef = await pull(client, image, "web");
    // containerd was asked for the digest: it holds the repository at that digest, not the tag.
    const byDigest = await status(containerd, `${registry.host}/apps/signed@${digest}`);
    assert.equal(byDigest?.id, imageRef);
    assert.equal(await status(containerd, image), undefined);
    // The kubelet's next look for the tag (a container restart, another pod) finds the verified image.
    assert.equal((await status(client, image, "web"))?.id, imageRef);
    assert.equal((await status(client, image, "other"))?.id, imageRef, "nothing in the policies depends on the pod: the verdict holds for every pod");
    assert.equal(await p.metric('imprimatur_node_image_checks_total{result="not-verified"}'), 0);
    assert.equal(await p.metric('imprimatur_node_pull_verifications_total{outcome="verified"}'), 1);
  });

  test("an unsigned image is refused with the reason, and nothing is pulled", async () => {
    const digest = await push("apps/unsigned", "v1", false);
    const image = `${registry.host}/apps/unsigned:v1`;
    const { p, client } = await proxy(join(dir, "state-unsigned"), ["--policies", await policyFolder("unsigned"), "--registries", registriesFile]);
    const e = await refusal(client, image, "web");
    assert.equal(e.code, grpc.status.PERMISSION_DENIED);
    assert.match(
      e.details,
      new RegExp(`^imprimatur node-proxy refused the pull: image ".*/apps/unsigned:v1@${digest}" denied by policy signed-at-the-node rules\\[0\\]: `),
    );
    assert.equal(await status(containerd, `${registry.host}/apps/unsigned@${digest}`), undefined);
    assert.equal(await p.metric('imprimatur_node_pull_verifications_total{outcome="refused"}'), 1);
  });

  test("a tag moved to an unsigned build: the node keeps running the verified digest, and the next pull of the tag is refused", async () => {
    const first = await push("apps/moving", "v1", true);
    const image = `${registry.host}/apps/moving:v1`;
    const { client } = await proxy(join(dir, "state-moving"), ["--policies", await policyFolder("moving"), "--registries", registriesFile]);
    const imageRef = await pull(client, image, "web");
    const moved = await push("apps/moving", "v1", false);
    assert.notEqual(moved, first);
    assert.equal((await status(client, image, "web"))?.id, imageRef, "IfNotPresent: the verified digest, not what the tag names now");
    // Someone pulls the moved tag straight from containerd (crictl pull): the tag now names the unsigned build there.
    await containerd.call("runtime.v1", "PullImage", pullImageRequest(image, "crictl", { username: registry.username, password: registry.password }), {
      deadline: Date.now() + 60_000,
    });
    assert.notEqual((await status(containerd, image))?.id, imageRef);
    assert.equal((await status(client, image, "web"))?.id, imageRef, "still the image verified under this name");
    const e = await refusal(client, image, "web");
    assert.match(e.details, new RegExp(`apps/moving:v1@${moved}" denied`));
  });

  test("an unsigned image already on the node is not used under IfNotVerified, and is under Never", async () => {
    const digest = await push("apps/preloaded", "v1", false);
    const image = `${registry.host}/apps/preloaded:v1`;
    // Pulled straight into containerd before the proxy starts: preloaded.
    await containerd.call("runtime.v1", "PullImage", pullImageRequest(image, "loader", { username: registry.username, password: registry.password }), {
      deadline: Date.now() + 60_000,
    });
    const folder = await policyFolder("preloaded");
    const checked = await proxy(join(dir, "state-preloaded"), ["--policies", folder, "--registries", registriesFile]);
    assert.equal(await status(checked.client, image, "web"), undefined, "reported absent: the kubelet pulls, and the pull is judged");
    assert.ok(await status(checked.client, image), "other callers (crictl, image GC) see the truth");
    assert.equal(await checked.p.metric('imprimatur_node_image_checks_total{result="not-verified"}'), 1);
    await refusal(checked.client, image, "web");
    await stop(checked.p);
    const trusting = await proxy(join(dir, "state-preloaded"), ["--policies", folder, "--registries", registriesFile, "--verify-present", "Never"]);
    assert.equal(
      (await status(trusting.client, image, "web"))?.repoDigests.some((d) => d.endsWith(digest)),
      true,
    );
  });

  test("a policy change: images verified under the old policies are verified again before a pod uses them", async () => {
    await push("apps/kept", "v1", true);
    const image = `${registry.host}/apps/kept:v1`;
    const stateDir = join(dir, "state-change");
    const before = await proxy(stateDir, ["--policies", await policyFolder("change-1"), "--registries", registriesFile]);
    const imageRef = await pull(before.client, image, "web");
    await stop(before.p);
    // The same policies after a restart: the record stands, for the tag too.
    const same = await proxy(stateDir, ["--policies", await policyFolder("change-2"), "--registries", registriesFile]); // the same documents elsewhere
    assert.equal((await status(same.client, image, "fresh"))?.id, imageRef);
    await stop(same.p);
    const changed = await proxy(stateDir, [
      "--policies",
      await policyFolder("change-3", [
        { apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name: "another" }, spec: { rules: [], default: "allow" } },
      ]),
      "--registries",
      registriesFile,
    ]);
    assert.equal(await status(changed.client, image, "fresh"), undefined, "not verified under the policies now in force");
    assert.equal(await pull(changed.client, image, "fresh"), imageRef);
    assert.equal((await status(changed.client, image, "fresh"))?.id, imageRef);
  });

  test("a NamespacedImagePolicy refuses its own namespace's pulls only, and makes each pod's verdict its own", async () => {
    await push("apps/tenant", "v1", true);
    const image = `${registry.host}/apps/tenant:v1`;
    const folder = await policyFolder("tenant", [
      {
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "NamespacedImagePolicy",
        metadata: { name: "not-here", namespace: "team" },
        spec: { rules: [{ action: "deny", images: [`${registry.host}/apps/tenant*`], message: "not in team" }], default: "allow" },
      },
    ]);
    const { client } = await proxy(join(dir, "state-tenant"), ["--policies", folder, "--registries", registriesFile]);
    // kubelet-cri.ts puts every pod in namespace "team".
    const e = await refusal(client, image, "web");
    assert.match(e.details, /NamespacedImagePolicy team\/not-here rules\[0\]: not in team/);
    const elsewhere = encodePullImageRequest({
      image,
      annotations: kubeletAnnotations("api"),
      auth: { username: registry.username, password: registry.password },
      sandbox: { ...kubeletSandbox("api"), namespace: "other" },
    });
    const imageRef = decodePullImageResponse(await client.call("runtime.v1", "PullImage", elsewhere, { deadline: Date.now() + 60_000 })).imageRef;
    assert.match(imageRef, /^sha256:/);
    // The verdict depended on the pod: another pod of "team" is not given the image "other" had verified.
    assert.equal(await status(client, image, "web"), undefined);
    assert.equal((await status(client, image, "api"))?.id, imageRef);
  });

  test("beside the credential check: a pod that has not shown credentials is told to pull, and its pull is judged", async () => {
    await push("apps/private", "v1", true);
    const image = `${registry.host}/apps/private:v1`;
    const { p, client } = await proxy(join(dir, "state-both"), [
      "--policies",
      await policyFolder("both"),
      "--registries",
      registriesFile,
      "--verification-policy",
      "AlwaysVerify",
    ]);
    const imageRef = await pull(client, image, "web");
    // Verified for every pod, but "other" has not shown a credential: the KEP-2535 check hides the image.
    assert.equal(await status(client, image, "other"), undefined);
    assert.equal(await p.metric('imprimatur_node_image_checks_total{result="must-pull"}'), 1);
    assert.equal(await p.metric('imprimatur_node_image_checks_total{result="not-verified"}'), 0);
    assert.equal(await pull(client, image, "other"), imageRef);
    assert.equal(await p.metric('imprimatur_node_pull_verifications_total{outcome="verified"}'), 2);
  });

  test("policies that do not load stop the start, with file, line and reason", async () => {
    const folder = join(dir, "broken");
    await mkdir(folder);
    await writeFile(
      join(folder, "bad.yaml"),
      "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: bad}\nspec:\n  rules: [{action: maybe, images: ['*']}]\n",
    );
    const r = await runCli([
      "node-proxy",
      "--listen",
      `unix://${join(dir, "never.sock")}`,
      "--runtime-endpoint",
      node.containerdEndpoint,
      "--state-dir",
      join(dir, "state-broken"),
      "--policies",
      folder,
    ]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /refusing to start: policies failed to load:\n\s+.*bad\.yaml:5.*action/);
  });
});
