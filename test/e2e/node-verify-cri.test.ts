// Verification at pull time through `imprimatur node-proxy --policies`, spoken to over CRI as the kubelet speaks
// (test/support/kubelet-cri.ts), in front of a real containerd pulling from a real docker-registry (TLS, htpasswd)
// that holds images signed by the project's test signers: cosign signatures, and Notary Project (Notation) JWS and
// COSE signatures over a test PKI (test/support/notation/), found through the referrers tag schema. What the node
// enforces that admission cannot: a pull is judged at the digest it resolves to and the runtime pulls that digest;
// an image already on the node is used only once verified under the policies in force. The path through a real
// kubelet is test/e2e/node-verify-kubelet.test.ts.
import assert from "node:assert/strict";
import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
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
import { signCoseEnvelope } from "../support/notation/cose-signer.ts";
import { notationPayload, signJwsEnvelope } from "../support/notation/jws-signer.ts";
import { NODE_NOTATION_POLICY, writeNotationFolder } from "../support/notation/node-notation-policy.ts";
import { pushNotationSignatures } from "../support/notation/notation-push.ts";
import { codeSigningChain } from "../support/notation/test-pki.ts";
import { buildRunnableImage, type RunnableImage } from "../support/runnable-image.ts";
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

/** Builds a runnable image and pushes it as repository:tag. */
async function pushImage(repository: string, tag: string): Promise<RunnableImage> {
  const built = buildRunnableImage({ tag, seed: `node-verify-${repository}-${tag}-${seeds++}` });
  layouts.push(built.layoutDir);
  await registry.push(built.layoutDir, tag, repository, tag);
  return built;
}

/** Signs an image pushed to `repository` with `key` (cosign, logged in the mock's Rekor). */
const cosignSign = (repository: string, digest: string) =>
  pushCosignSignatures({ registry, repository, digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });

/** Builds a runnable image, pushes it as repository:tag, signs it when asked; its manifest digest. */
async function push(repository: string, tag: string, signed: boolean): Promise<string> {
  const built = await pushImage(repository, tag);
  if (signed) await cosignSign(repository, built.digest);
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

describe("node-proxy --policies with a notary entry (Notary Project signatures)", () => {
  const identity = "x509.subject: C=US, ST=WA, O=Acme";
  let notation: { p: NodeProxyProcess; client: RuntimeImageClient };
  let stateDir: string;
  const digests = new Map<string, string>();
  const image = (repository: string) => `${registry.host}/${repository}:v1`;

  /** The node's audit record of the pull of `repository`'s image (one JSON line of audit.log in the state folder). */
  async function audited(repository: string): Promise<{ event: string; digest?: string; reason?: string; passes?: Array<{ policy: string; rule: string }> }> {
    const lines = (await readFile(join(stateDir, "audit.log"), "utf8")).split("\n").filter((l) => l !== "");
    const records = lines.map((l) => JSON.parse(l) as { image: string; event: string }).filter((r) => r.image === image(repository));
    assert.equal(records.length, 1, lines.join("\n"));
    return records[0]!;
  }

  before(async () => {
    const pki = await codeSigningChain("C=US, ST=WA, L=Seattle, O=Acme, CN=Release");
    // Another CA's certificate with the very subject the policy trusts: only the trust store tells them apart.
    const stranger = await codeSigningChain("C=US, ST=WA, L=Seattle, O=Acme, CN=Release");
    const target = { url: registry.url, caPem: registry.caPem, username: registry.username, password: registry.password };
    /** Pushes an image, signs it as asked; its digest is kept under its repository. */
    const signed = async (repository: string, o: { envelope?: "jws" | "cose"; chain?: typeof pki; cosign?: boolean }) => {
      const built = await pushImage(repository, "v1");
      digests.set(repository, built.digest);
      if (o.cosign) await cosignSign(repository, built.digest);
      if (!o.envelope) return;
      const manifest = await readFile(join(built.layoutDir, "blobs", "sha256", built.digest.slice("sha256:".length)));
      const subject = { mediaType: (JSON.parse(manifest.toString()) as { mediaType: string }).mediaType, digest: built.digest, size: manifest.length };
      const by = o.chain ?? pki;
      const payload = notationPayload(subject);
      const envelope =
        o.envelope === "jws"
          ? { mediaType: "application/jose+json", body: signJwsEnvelope({ payload, signer: by.leaf, chain: by.chain }), chain: by.chain }
          : {
              mediaType: "application/cose",
              body: signCoseEnvelope({ payload: new TextEncoder().encode(payload), signer: by.leaf, chain: by.chain }),
              chain: by.chain,
            };
      await pushNotationSignatures(target, repository, subject, [envelope]);
    };
    const folder = await writeNotationFolder(join(dir, "notation"), {
      sigstore,
      key,
      notary: { name: "release", certs: pki.root.pem, trustedIdentities: [identity] },
      both: [`${registry.host}/notation-two/*`],
      notaryOnly: [`${registry.host}/notation/*`],
    });
    stateDir = join(dir, "state-notation");
    // One proxy for this block's tests, started while the images are pushed: nothing is judged before a test pulls.
    [notation] = await Promise.all([
      proxy(stateDir, ["--policies", folder, "--registries", registriesFile]),
      signed("notation/jws", { envelope: "jws" }),
      signed("notation/unsigned", {}),
      signed("notation/untrusted", { envelope: "jws", chain: stranger }),
      signed("notation-two/both", { envelope: "cose", cosign: true }),
      signed("notation-two/cosign-only", { cosign: true }),
    ]);
  });

  test("an image with a Notation JWS signature the notary entry trusts is verified and pulled by its digest", async () => {
    const digest = digests.get("notation/jws")!;
    const imageRef = await pull(notation.client, image("notation/jws"), "web");
    assert.equal((await status(containerd, `${registry.host}/notation/jws@${digest}`))?.id, imageRef);
    assert.equal(await status(containerd, image("notation/jws")), undefined, "containerd was asked for the digest, not the tag");
    assert.equal((await status(notation.client, image("notation/jws"), "web"))?.id, imageRef);
    const record = await audited("notation/jws");
    assert.equal(record.event, "pull-verified");
    assert.equal(record.digest, digest);
    assert.deepEqual(
      record.passes?.map((p) => `${p.policy} ${p.rule}`),
      [`${NODE_NOTATION_POLICY} rules[1]`],
    );
  });

  test("the same policy refuses an image without a Notation signature, and one signed by an untrusted chain, saying why; nothing is pulled", async () => {
    for (const [repository, why] of [
      ["notation/unsigned", "notary release: no Notary Project signature found"],
      ["notation/untrusted", "no certificate of the chain is in the certificates of notary release"],
    ] as const) {
      const digest = digests.get(repository)!;
      const e = await refusal(notation.client, image(repository), "web");
      assert.equal(e.code, grpc.status.PERMISSION_DENIED, e.details);
      assert.match(
        e.details,
        new RegExp(
          `^imprimatur node-proxy refused the pull: image ".*/${repository}:v1@${digest}" denied by policy ${NODE_NOTATION_POLICY} rules\\[1\\]: .*${why}`,
        ),
      );
      assert.equal(await status(containerd, `${registry.host}/${repository}@${digest}`), undefined);
      assert.equal(await status(containerd, image(repository)), undefined);
      const record = await audited(repository);
      assert.equal(record.event, "pull-refused");
      assert.match(record.reason ?? "", new RegExp(why));
    }
  });

  test("count: 2 over a cosign key and a notary entry: a cosign and a COSE signature together are pulled; the cosign one alone is refused", async () => {
    const counted = (outcome: string) => notation.p.metric(`imprimatur_node_pull_verifications_total{outcome="${outcome}"}`);
    const [verified, refused] = [await counted("verified"), await counted("refused")];
    const both = digests.get("notation-two/both")!;
    const imageRef = await pull(notation.client, image("notation-two/both"), "web");
    assert.equal((await status(containerd, `${registry.host}/notation-two/both@${both}`))?.id, imageRef);
    assert.deepEqual(
      (await audited("notation-two/both")).passes?.map((p) => `${p.policy} ${p.rule}`),
      [`${NODE_NOTATION_POLICY} rules[0]`],
    );
    const alone = digests.get("notation-two/cosign-only")!;
    const e = await refusal(notation.client, image("notation-two/cosign-only"), "web");
    assert.match(
      e.details,
      new RegExp(
        `"[^"]*/notation-two/cosign-only:v1@${alone}" denied by policy ${NODE_NOTATION_POLICY} rules\\[0\\]: .*needs all 2: key release\\.pub verified; notary release: no Notary Project signature found`,
      ),
    );
    assert.equal(await status(containerd, `${registry.host}/notation-two/cosign-only@${alone}`), undefined);
    assert.equal(await counted("verified"), verified + 1);
    assert.equal(await counted("refused"), refused + 1);
  });
});
