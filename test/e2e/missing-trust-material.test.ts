// A TrustRoot or a keyRef Secret that goes away must not switch a policy off. On a real etcd + kube-apiserver
// v1.20 with `serve --policy-crds` behind a ValidatingWebhookConfiguration, and a real docker-registry holding
// images signed by the offline test signer: an ImagePolicy with a deny rule, `default: deny`, a rule verifying
// with TrustRoot `corp` and one verifying with a key in a Secret. Deleting the TrustRoot, then the Secret, makes
// exactly the rule that needs it deny (naming it) while the rest enforces; recreating it restores verification
// without a restart. The same holds for a policy folder (`serve --policies DIR`) whose TrustRoot file goes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { podReview } from "../support/admission.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startKubeCluster, untilWebhookActive, validatingWebhookConfiguration, webhookRule, type KubeCluster } from "../support/kube-cluster.ts";
import { podYaml } from "../support/manifests.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NS = "trust-material";
const EVIL = "evil.example/x:1";
const UNLISTED = "quay.io/unlisted/app:1";

let dir: string;
let cluster: KubeCluster;
let registry: TestRegistry;
let sigstore: MockSigstore;
let server: ImprimaturProcess | undefined;
let filesServer: ImprimaturProcess | undefined;
const layouts = new TestLayouts();
/** Images by digest: under the rule needing TrustRoot corp, and under the rule with the Secret's key. */
const images = { corp: "", keyed: "" };
let secretKey: SigningKey;

async function pushSigned(repository: string, key: SigningKey): Promise<string> {
  const layout = await layouts.push(registry, repository, "1", { seed: `${repository}:1` });
  await pushCosignSignatures({ registry, repository, digest: layout.digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });
  return `${registry.host}/${repository}@${layout.digest}`;
}

/** The policy of both servers: a deny rule, a rule needing TrustRoot corp, one with a key in a Secret, default deny. */
function gate(releaseKey: SigningKey): Record<string, unknown> {
  return {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "gate" },
    spec: {
      namespaces: [NS],
      rules: [
        { action: "deny", images: ["evil.example/*"], message: "evil.example is never admitted" },
        {
          action: "allow",
          images: [`${registry.host}/corp/*`],
          attestors: [{ entries: [{ staticKey: { name: "release", key: releaseKey.publicKeyPem, trustRoot: "corp" } }] }],
        },
        {
          action: "allow",
          images: [`${registry.host}/keyed/*`],
          attestors: [{ entries: [{ staticKey: { keyRef: `k8s://${NS}/signing`, ignoreTlog: true } }] }],
        },
      ],
      default: "deny",
    },
  };
}

const trustRoot = () => ({ apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "corp" }, spec: { trustedRoot: sigstore.trustedRoot } });

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-trust-material-"));
  [cluster, registry, sigstore] = await Promise.all([
    startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] }),
    startRegistry({ auth: "none" }),
    createMockSigstore({ name: "corp" }),
  ]);
  const releaseKey = generateSigningKey("ecdsa-p256");
  secretKey = generateSigningKey("ecdsa-p256");
  images.corp = await pushSigned("corp/app", releaseKey);
  images.keyed = await pushSigned("keyed/app", secretKey);

  const installed = await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds")]);
  assert.equal(installed.code, 0, installed.stderr);
  const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
  assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
  // v1.20 does not label namespaces with their name yet: label it so the webhook's selector matches.
  assert.equal((await cluster.kubectl(["label", "namespace", NS, `kubernetes.io/metadata.name=${NS}`])).code, 0);
  await createSigningSecret();

  await writeFile(join(dir, "registries.yaml"), registry.registryConfig());
  await writeFile(
    join(dir, "config.yaml"),
    stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ServerConfig", kubeconfig: cluster.kubeconfig, registries: join(dir, "registries.yaml") }),
  );
  assert.equal((await cluster.apply(JSON.stringify(trustRoot()))).code, 0);
  assert.equal((await cluster.apply(JSON.stringify(gate(releaseKey)))).code, 0);
  server = await startImprimatur(["--policy-crds", "--config", join(dir, "config.yaml")]);
  const vwc = validatingWebhookConfiguration(server, {
    name: "imprimatur-trust-material",
    rules: [webhookRule("pods")],
    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": NS } },
  });
  assert.equal((await cluster.apply(vwc)).code, 0);
  await untilWebhookActive(cluster, podYaml("probe", NS, [EVIL]), (p) => /evil\.example is never admitted/.test(p.stderr), { context: () => server!.log() });

  // The folder of the files server: the same policy; the TrustRoot comes and goes in the test.
  await mkdir(join(dir, "policies"));
  await writeFile(join(dir, "policies", "gate.yaml"), stringify(gate(releaseKey)));
});

after(async () => {
  await teardown([
    () => filesServer?.stop(),
    () => server?.stop(),
    () => cluster?.stop(),
    () => registry?.stop(),
    ...layouts.removals(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]);
});

async function createSigningSecret(): Promise<void> {
  const created = await cluster.kubectl(["create", "secret", "generic", "signing", "-n", NS, `--from-literal=cosign.pub=${secretKey.publicKeyPem}`]);
  assert.equal(created.code, 0, created.stderr);
}

/** What the apiserver says to a pod with this image, through the webhook (a server-side dry run): "" when admitted. */
async function denial(image: string): Promise<string> {
  const res = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: podYaml("probe", NS, [image]) });
  if (res.code === 0) return "";
  if (!/denied the request/.test(res.stderr)) throw new Error(`unexpected failure: ${res.stderr}`);
  return res.stderr;
}

async function until(what: string, check: () => Promise<boolean>, log: () => Promise<string> = () => server!.log()): Promise<void> {
  const deadline = Date.now() + 40_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within 40 s; serve log:\n${(await log()).slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

interface Condition {
  type: string;
  status?: string;
  reason?: string;
  message?: string;
}

async function readyCondition(): Promise<Condition | undefined> {
  const res = await cluster.kubectl(["get", "imagepolicy", "gate", "-o", "json"]);
  assert.equal(res.code, 0, res.stderr);
  const conditions = (JSON.parse(res.stdout) as { status?: { conditions?: Condition[] } }).status?.conditions ?? [];
  return conditions.find((c) => c.type === "Ready");
}

/** The deny rule and the default keep enforcing, with their own reasons. */
async function assertRestEnforces(): Promise<void> {
  assert.match(await denial(EVIL), /rules\[0\]: evil\.example is never admitted/);
  assert.match(await denial(UNLISTED), /default: no rule of this policy allows this image/);
}

test("TrustRoot deleted: its rule denies naming it, the deny rule, the default and the other rules enforce; recreated, it verifies again", async () => {
  await until("both verify rules admit", async () => (await denial(images.corp)) === "" && (await denial(images.keyed)) === "");
  await until("Ready=True", async () => (await readyCondition())?.status === "True");
  await assertRestEnforces();

  assert.equal((await cluster.kubectl(["delete", "trustroot", "corp"])).code, 0);
  await until("the rule needing corp denies", async () => (await denial(images.corp)) !== "");
  assert.match(
    await denial(images.corp),
    /gate rules\[1\]: .*trust root "corp" is not loaded \(no TrustRoot is loaded; sigstore-public-good is embedded\): this rule cannot verify signatures/,
  );
  await assertRestEnforces();
  assert.equal(await denial(images.keyed), "", "the rule that does not need corp still verifies");
  await until("Ready=False TrustRootNotFound", async () => (await readyCondition())?.reason === "TrustRootNotFound");
  const condition = await readyCondition();
  assert.equal(condition?.status, "False");
  assert.match(
    condition?.message ?? "",
    /^spec\.rules\[1\]\.attestors\[0\]\.entries\[0\]\.staticKey\.trustRoot: .*trust root "corp" is not loaded.*\(this policy is in force; the rules named deny every image they match\)$/,
  );

  assert.equal((await cluster.apply(JSON.stringify(trustRoot()))).code, 0);
  await until("the rule verifies again", async () => (await denial(images.corp)) === "");
  await until("Ready=True again", async () => (await readyCondition())?.status === "True");
  await assertRestEnforces();
});

test("keyRef Secret deleted: its rule denies naming the Secret, the rest enforces; recreated, it verifies again", async () => {
  await until("the Secret's key verifies", async () => (await denial(images.keyed)) === "");
  assert.equal((await cluster.kubectl(["delete", "secret", "signing", "-n", NS])).code, 0);
  // Keys read from a Secret are used for 10 s; a result verified with one is not used without it.
  await until("the rule with the Secret's key denies", async () => (await denial(images.keyed)) !== "");
  assert.match(
    await denial(images.keyed),
    new RegExp(
      `gate rules\\[2\\]: .*key k8s://${NS}/signing/cosign\\.pub: cannot read secret ${NS}/signing: .*not found.*: this rule denies every image it matches`,
    ),
  );
  await assertRestEnforces();
  assert.equal(await denial(images.corp), "", "the rule that does not need the Secret still verifies");

  await createSigningSecret();
  await until("the rule verifies again", async () => (await denial(images.keyed)) === "");
  await assertRestEnforces();
});

test("serve --policies DIR: a TrustRoot file missing at start or removed later makes its rule deny; the rest enforces", async () => {
  // No TrustRoot in the folder: serve starts all the same, and the rule that needs it denies.
  filesServer = await startImprimatur(["--policies", join(dir, "policies"), "--config", join(dir, "config.yaml")]);
  const files = filesServer;
  const review = async (image: string): Promise<string> => {
    const res = await postJson(`${files.baseUrl}/validate`, files.ca, podReview({ images: [image], namespace: NS }));
    assert.equal(res.status, 200, res.text);
    const response = res.body.response as { allowed: boolean; status?: { message?: string } };
    return response.allowed ? "" : (response.status?.message ?? "denied");
  };
  const filesLog = () => files.log();
  await until("serve logs the rule that denies", async () => /a policy rule denies every image it matches/.test(await filesLog()), filesLog);
  assert.match(await review(images.corp), /gate rules\[1\]: .*trust root "corp" is not loaded/);
  assert.match(await review(EVIL), /rules\[0\]: evil\.example is never admitted/);
  assert.match(await review(UNLISTED), /default: no rule of this policy allows this image/);
  assert.equal(await review(images.keyed), "");

  // Added: reloaded from the folder, the rule verifies.
  await writeFile(join(dir, "policies", "corp.yaml"), stringify(trustRoot()));
  await until("the rule verifies once corp.yaml is there", async () => (await review(images.corp)) === "", filesLog);

  // Removed: the reload does not fail (keeping the removed root in force); the rule denies again.
  await unlink(join(dir, "policies", "corp.yaml"));
  await until("the rule denies once corp.yaml is gone", async () => /trust root "corp" is not loaded/.test(await review(images.corp)), filesLog);
  assert.match(await review(EVIL), /rules\[0\]: evil\.example is never admitted/);
  assert.match(await review(UNLISTED), /default: no rule of this policy allows this image/);
});
