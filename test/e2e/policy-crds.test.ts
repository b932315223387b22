// Policies as custom resources on a real etcd + kube-apiserver v1.20: the generated CRDs are accepted, every
// shipped policy of their kinds passes the apiserver's validation and a wrong one is refused; then
// `imprimatur serve --policy-crds` (the real command, as a child process) is called by the apiserver through a
// ValidatingWebhookConfiguration while ImagePolicies are applied, broken, fixed and deleted with kubectl.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { startKubeCluster, untilWebhookActive, validatingWebhookConfiguration, webhookRule, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { podYaml } from "../support/manifests.ts";
import { embeddedTrustedRootJson } from "../../src/verification/trust-roots.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NS = "crd-e2e";
/** The namespace serve honours PolicyExceptions in (--exceptions-namespace). */
const EXCEPTIONS_NS = "crd-exceptions";
let cluster: KubeCluster;
let server: ImprimaturProcess | undefined;
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-crds-"));
  cluster = await startKubeCluster({
    enableAdmissionPlugins: ["ValidatingAdmissionWebhook"],
    // Watches straight from etcd, compacted every few seconds: a watch resumed from a resource version the
    // apiserver no longer has is refused with 410 Gone, as happens in a long-lived cluster (last test).
    extraArgs: ["--watch-cache=false", "--etcd-compaction-interval=5s"],
  });
  // Before the CRDs are installed, serve --policy-crds refuses to start and says what is missing.
  await assert.rejects(
    startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds"]),
    /exited with 2: [\s\S]*the CustomResourceDefinition imagepolicies\.imprimatur\.dev is not installed: kubectl apply -k deploy\/crds/,
  );
  const installed = await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds")]);
  assert.equal(installed.code, 0, installed.stderr);
  const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
});

after(async () => {
  await server?.stop();
  await cluster?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Every document of the CRD kinds under examples/ and policies/, with the file it came from. */
async function shippedPolicyDocuments(): Promise<Array<{ file: string; doc: Record<string, unknown> }>> {
  const found: Array<{ file: string; doc: Record<string, unknown> }> = [];
  const walk = async (folder: string): Promise<void> => {
    for (const entry of await readdir(folder, { withFileTypes: true })) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (/\.ya?ml$/.test(entry.name)) {
        for (const d of parseAllDocuments(await readFile(path, "utf8"))) {
          const doc = d.toJS() as Record<string, unknown> | null;
          if (doc && ["ImagePolicy", "PodRestriction", "TrustRoot"].includes(doc.kind as string)) found.push({ file: relative(ROOT, path), doc });
        }
      }
    }
  };
  await walk(join(ROOT, "examples"));
  await walk(join(ROOT, "policies"));
  return found;
}

test("the generated CRDs are served with their names, short names and category", async () => {
  const resources = await cluster.kubectl(["api-resources", "--api-group=imprimatur.dev", "-o", "wide"]);
  assert.equal(resources.code, 0, resources.stderr);
  for (const line of [
    "imagepolicies +imgpol +imprimatur.dev/v1alpha1 +false +ImagePolicy",
    "podrestrictions +podres",
    "trustroots +imprimatur.dev/v1alpha1 +false +TrustRoot",
  ])
    assert.match(resources.stdout, new RegExp(line), resources.stdout);
  assert.match(resources.stdout, /imagepolicies .*imprimatur/);
});

test("every shipped policy of the CRD kinds passes the apiserver's validation", async () => {
  const docs = await shippedPolicyDocuments();
  assert.ok(docs.some((d) => d.doc.kind === "ImagePolicy") && docs.some((d) => d.doc.kind === "PodRestriction"), "found the shipped policies");
  for (const { file, doc } of docs) {
    // The PodRestrictions design's examples write policy/v1alpha1, which the loader accepts and the API does not serve.
    const asResource = { ...doc, apiVersion: "imprimatur.dev/v1alpha1" };
    const res = await cluster.kubectl(["create", "--dry-run=server", "-o", "name", "-f", "-"], { input: JSON.stringify(asResource) });
    assert.equal(res.code, 0, `${file} ${String((doc.metadata as { name?: string }).name)}: ${res.stderr}`);
  }
});

test("a policy the schema does not allow is refused by the apiserver, naming the field", async () => {
  const bad = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "bad-action" },
    spec: { rules: [{ action: "perhaps", images: ["nginx"] }] },
  };
  const res = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: JSON.stringify(bad) });
  assert.notEqual(res.code, 0);
  assert.match(res.stderr, /spec\.rules\.action: Unsupported value: "perhaps"/);
  const noRules = { ...bad, metadata: { name: "no-rules" }, spec: { default: "deny" } };
  const missing = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: JSON.stringify(noRules) });
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /spec\.rules: Required value/);
  // An empty API version in a resource rule: refused here as by the loader (kube-apiserver's webhook rules refuse it too).
  const withVersions = (name: string, apiVersions: string[]) => ({
    ...bad,
    metadata: { name },
    spec: {
      matchConstraints: { resourceRules: [{ apiGroups: [""], apiVersions, resources: ["pods"], operations: ["CREATE"] }] },
      rules: [{ action: "allow", images: ["*"] }],
    },
  });
  const emptyVersion = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: JSON.stringify(withVersions("empty-version", [""])) });
  assert.notEqual(emptyVersion.code, 0);
  assert.match(emptyVersion.stderr, /spec\.matchConstraints\.resourceRules\.apiVersions/);
  const v1 = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: JSON.stringify(withVersions("core-v1", ["v1"])) });
  assert.equal(v1.code, 0, `the core group "" is stored: ${v1.stderr}`);
});

// ---------------------------------------------------------------------------------------------------------
// serve --policy-crds behind the apiserver

const policy = (name: string, rules: unknown[]) =>
  JSON.stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name }, spec: { namespaces: [NS], rules, default: "allow" } });

/** What the apiserver says to a pod with this image, through the webhook (a server-side dry run). */
async function admits(image: string): Promise<boolean> {
  const res = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: podYaml("probe", NS, [image]) });
  if (res.code !== 0 && !/denied the request/.test(res.stderr)) throw new Error(`unexpected failure: ${res.stderr}`);
  return res.code === 0;
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; ; i++) {
    if (await check()) return;
    if (i > 150) throw new Error(`${what} did not happen; serve log:\n${(await server?.log())?.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

interface Condition {
  type: string;
  status?: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

async function readyCondition(name: string): Promise<Condition | undefined> {
  const res = await cluster.kubectl(["get", "imagepolicy", name, "-o", "json"]);
  assert.equal(res.code, 0, res.stderr);
  const obj = JSON.parse(res.stdout) as { status?: { conditions?: Condition[] } };
  return obj.status?.conditions?.find((c) => c.type === "Ready");
}

async function generation(name: string): Promise<number> {
  const res = await cluster.kubectl(["get", "imagepolicy", name, "-o", "jsonpath={.metadata.generation}"]);
  return Number(res.stdout);
}

test("serve --policy-crds: applied, broken, fixed and deleted ImagePolicies take effect on /validate", async () => {
  assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
  // The folder beside the custom resources: read as part of the same set.
  const folder = join(dir, "policies");
  await mkdir(folder);
  await writeFile(join(folder, "from-folder.yaml"), policy("from-folder", [{ action: "deny", images: ["registry.example.com/folder-denied"] }]));
  // A fresh install has no policy yet: serve starts all the same.
  const fresh = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds"]);
  assert.match(await fresh.log(), /no policy is loaded: every request is admitted/);
  await fresh.stop();
  server = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds", "--policies", folder, "--exceptions-namespace", EXCEPTIONS_NS]);
  const vwc = validatingWebhookConfiguration(server, {
    name: "imprimatur-crds",
    rules: [webhookRule("pods")],
    namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": NS } },
  });
  // v1.20 does not label namespaces with their name yet: label it so the selector matches.
  assert.equal((await cluster.kubectl(["label", "namespace", NS, `kubernetes.io/metadata.name=${NS}`])).code, 0);
  assert.equal((await cluster.apply(vwc)).code, 0);
  await untilWebhookActive(cluster, podYaml("probe", NS, ["registry.example.com/folder-denied:1"]), (p) => p.code !== 0);

  // Applied: in force within seconds, and Ready=True for the generation compiled.
  assert.equal(await admits("registry.example.com/app:1"), true);
  const applied = await cluster.apply(policy("team-images", [{ action: "deny", images: ["registry.example.com/app"], message: "not this one" }]));
  assert.equal(applied.code, 0, applied.stderr);
  await until("the applied policy denies", async () => !(await admits("registry.example.com/app:1")));
  await until("Ready=True", async () => (await readyCondition("team-images"))?.status === "True");
  assert.deepEqual(
    { ...(await readyCondition("team-images")), lastTransitionTime: undefined },
    { type: "Ready", status: "True", reason: "Loaded", message: "compiled and in force", observedGeneration: 1, lastTransitionTime: undefined },
  );
  const listed = await cluster.kubectl(["get", "imagepolicies"]);
  assert.match(listed.stdout, /team-images\s+True/);

  // Broken: the apiserver takes it (the schema cannot see a bad image pattern); the loader refuses it, the
  // status and an Event say why, and the previous generation stays in force.
  const broken = await cluster.apply(policy("team-images", [{ action: "deny", images: ["[registry.example.com/app"] }]));
  assert.equal(broken.code, 0, broken.stderr);
  await until("Ready=False", async () => (await readyCondition("team-images"))?.status === "False");
  const rejected = await readyCondition("team-images");
  assert.equal(rejected?.reason, "InvalidPolicy");
  assert.equal(rejected?.observedGeneration, 2);
  assert.match(
    rejected?.message ?? "",
    /^spec\.rules\[0\]\.images\[0\]: invalid image pattern "\[registry\.example\.com\/app".*\(generation 1 stays in force\)$/,
  );
  const yaml = await cluster.kubectl(["get", "imagepolicy", "team-images", "-o", "yaml"]);
  assert.match(yaml.stdout, /reason: InvalidPolicy/);
  const described = await cluster.kubectl(["describe", "imagepolicy", "team-images"]);
  assert.match(described.stdout, /Warning\s+InvalidPolicy/, described.stdout);
  await until("a Warning Event", async () => {
    const events = await cluster.kubectl(["get", "events", "-n", "default", "--field-selector", "involvedObject.name=team-images,type=Warning", "-o", "json"]);
    const items = (JSON.parse(events.stdout || "{}") as { items?: Array<{ reason: string; message: string; involvedObject: { kind: string } }> }).items ?? [];
    return items.some((e) => e.reason === "InvalidPolicy" && e.involvedObject.kind === "ImagePolicy" && /images\[0\]/.test(e.message));
  });
  assert.equal(await admits("registry.example.com/app:1"), false, "generation 1 still denies");
  assert.equal(await admits("registry.example.com/folder-denied:1"), false, "the folder's policy stays in force");

  // A second, valid policy still comes into force beside the broken one.
  assert.equal((await cluster.apply(policy("other-team", [{ action: "deny", images: ["registry.example.com/other"] }]))).code, 0);
  await until("the other policy denies", async () => !(await admits("registry.example.com/other:1")));

  // A name the folder already defines: a conflict, reported on the resource; the folder's policy stays.
  assert.equal((await cluster.apply(policy("from-folder", [{ action: "deny", images: ["registry.example.com/clash"] }]))).code, 0);
  await until("Ready=False (conflict)", async () => (await readyCondition("from-folder"))?.reason === "PolicyConflict");
  assert.match(
    (await readyCondition("from-folder"))?.message ?? "",
    /metadata\.name: ImagePolicy "from-folder" is already defined in .*from-folder\.yaml \(this policy is not in force\)/,
  );
  assert.equal(await admits("registry.example.com/clash:1"), true);
  assert.equal(await admits("registry.example.com/folder-denied:1"), false);

  // Fixed: the error clears and the new generation is in force.
  assert.equal((await cluster.apply(policy("team-images", [{ action: "deny", images: ["registry.example.com/app2"] }]))).code, 0);
  await until("Ready=True again", async () => (await readyCondition("team-images"))?.status === "True");
  assert.equal((await readyCondition("team-images"))?.observedGeneration, await generation("team-images"));
  await until("the fixed policy is in force", async () => (await admits("registry.example.com/app:1")) && !(await admits("registry.example.com/app2:1")));

  // Deleted: its effect goes.
  assert.equal((await cluster.kubectl(["delete", "imagepolicy", "team-images"])).code, 0);
  await until("the deleted policy no longer denies", () => admits("registry.example.com/app2:1"));
  assert.equal(await admits("registry.example.com/other:1"), false, "the other policy stays");
});

test("a policy whose CEL is estimated past kube-apiserver's cost limit is applied, refused by the loader, and its status says why with the estimate", async () => {
  const nested = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "nested-loops" },
    spec: {
      namespaces: [NS],
      matchConditions: [
        {
          name: "pairs",
          expression: "object.spec.containers.all(a, object.spec.containers.all(b, object.spec.containers.all(c, a.name + b.name + c.name != '')))",
        },
      ],
      rules: [{ action: "deny", images: ["registry.example.com/nested"] }],
      default: "allow",
    },
  };
  const applied = await cluster.apply(JSON.stringify(nested));
  assert.equal(applied.code, 0, applied.stderr);
  await until("Ready=False", async () => (await readyCondition("nested-loops"))?.status === "False");
  const refused = await readyCondition("nested-loops");
  assert.equal(refused?.reason, "InvalidPolicy");
  assert.match(
    refused?.message ?? "",
    /^spec\.matchConditions\[0\]\.expression: CEL ".*": estimated cost \d\.\de\+\d+ exceeds budget by factor of more than 100x: at most 10000000 is allowed/,
  );
  assert.equal(await admits("registry.example.com/nested:1"), true, "not in force");
  assert.equal((await cluster.kubectl(["delete", "imagepolicy", "nested-loops"])).code, 0);
});

test("TrustRoots and k8s:// keys from resources work as from files", async () => {
  assert.ok(server, "serve runs (previous test)");
  const keyless = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "signed" },
    spec: {
      namespaces: [NS],
      rules: [
        {
          action: "allow",
          images: ["registry.example.com/signed/*"],
          attestors: [{ entries: [{ keyless: { subject: "*", issuer: "*", trustRoot: "corp" } }] }],
        },
      ],
      default: "allow",
    },
  };
  assert.equal((await cluster.apply(JSON.stringify(keyless))).code, 0);
  // In force before its TrustRoot exists: the rule that needs it denies, and the status says so.
  await until("no TrustRoot corp yet", async () => (await readyCondition("signed"))?.reason === "TrustRootNotFound");
  assert.match((await readyCondition("signed"))?.message ?? "", /keyless\.trustRoot: .*"corp" is not loaded.*\(this policy is in force; the rules named deny/);
  assert.equal(await admits(`registry.example.com/signed/app@sha256:${"a".repeat(64)}`), false);

  const root = { apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "corp" }, spec: { trustedRoot: embeddedTrustedRootJson() } };
  assert.equal((await cluster.apply(JSON.stringify(root))).code, 0);
  await until("the ImagePolicy loads once its TrustRoot exists", async () => (await readyCondition("signed"))?.status === "True");
  const rootStatus = await cluster.kubectl(["get", "trustroot", "corp", "-o", "jsonpath={.status.conditions[0].status}"]);
  assert.equal(rootStatus.stdout, "True");

  const secretKey = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "secret-key" },
    spec: {
      namespaces: [NS],
      rules: [{ action: "allow", images: ["registry.example.com/keyed/*"], attestors: [{ entries: [{ staticKey: { keyRef: `k8s://${NS}/signing` } }] }] }],
      default: "allow",
    },
  };
  assert.equal((await cluster.apply(JSON.stringify(secretKey))).code, 0);
  await until("a k8s:// keyRef compiles", async () => (await readyCondition("secret-key"))?.status === "True");
  // A file next to the policy has no meaning for a resource: refused with the loader's reason.
  const fileKey = {
    ...secretKey,
    metadata: { name: "file-key" },
    spec: { ...secretKey.spec, rules: [{ ...secretKey.spec.rules[0], attestors: [{ entries: [{ staticKey: { keyRef: "cosign.pub" } }] }] }] },
  };
  assert.equal((await cluster.apply(JSON.stringify(fileKey))).code, 0);
  await until("a file keyRef is refused", async () => (await readyCondition("file-key"))?.reason === "InvalidPolicy");
  assert.match(
    (await readyCondition("file-key"))?.message ?? "",
    /staticKey\.keyRef: key files can only be named by policies loaded from files \(this policy is not in force\)/,
  );
});

test("a PodRestriction resource takes effect and goes with its deletion", async () => {
  assert.ok(server, "serve runs (earlier test)");
  const hostNetworkPod = JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "host-net", namespace: NS },
    spec: { hostNetwork: true, containers: [{ name: "c", image: "registry.example.com/app3:1" }] },
  });
  const admitted = async () => {
    const res = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: hostNetworkPod });
    if (res.code !== 0 && !/denied the request/.test(res.stderr)) throw new Error(res.stderr);
    return res.code === 0;
  };
  assert.equal(await admitted(), true);
  const restriction = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "PodRestriction",
    metadata: { name: "no-host-network" },
    binding: { namespaces: [NS] },
    spec: { spec: { securityContext: { hostNetwork: { require: false } } } },
  };
  assert.equal((await cluster.apply(JSON.stringify(restriction))).code, 0);
  await until("the PodRestriction denies", async () => !(await admitted()));
  const ready = await cluster.kubectl(["get", "podres", "no-host-network", "-o", "jsonpath={.status.conditions[0].status}/{.status.observedGeneration}"]);
  assert.equal(ready.stdout, "True/1");
  assert.equal((await cluster.kubectl(["delete", "podrestriction", "no-host-network"])).code, 0);
  await until("the deleted PodRestriction no longer denies", admitted);
});

test("a PolicyException resource sets a rule aside for the pods it matches, only from an honoured namespace; its status says which", async () => {
  assert.ok(server, "serve runs (earlier test)");
  for (const ns of [EXCEPTIONS_NS, "crd-unhonoured"]) assert.equal((await cluster.kubectl(["create", "namespace", ns])).code, 0);
  const legacyImage = "registry.example.com/legacy/report:1";
  assert.equal(
    (await cluster.apply(policy("no-legacy", [{ action: "deny", images: ["registry.example.com/legacy/*"], message: "legacy images are retired" }]))).code,
    0,
  );
  const create = (name: string) => cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: podYaml(name, NS, [legacyImage]) });
  await until("the policy denies", async () => (await create("nightly-1")).code !== 0);

  const exception = (namespace: string) =>
    JSON.stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "PolicyException",
      metadata: { name: "legacy-nightly", namespace },
      spec: { exceptions: [{ policyName: "no-legacy" }], match: { any: [{ resources: { kinds: ["Pod"], namespaces: [NS], names: ["nightly-*"] } }] } },
    });
  const exceptionReady = async (namespace: string) => {
    const res = await cluster.kubectl(["get", "policyexceptions.imprimatur.dev", "legacy-nightly", "-n", namespace, "-o", "json"]);
    assert.equal(res.code, 0, res.stderr);
    return (JSON.parse(res.stdout) as { status?: { conditions?: Condition[] } }).status?.conditions?.find((c) => c.type === "Ready");
  };

  // In a namespace serve does not honour: not in force, and its status says why.
  assert.equal((await cluster.apply(exception("crd-unhonoured"))).code, 0);
  await until("Ready=False NotHonoured", async () => (await exceptionReady("crd-unhonoured"))?.reason === "NotHonoured");
  assert.equal((await exceptionReady("crd-unhonoured"))?.status, "False");
  assert.match((await exceptionReady("crd-unhonoured"))?.message ?? "", /--exceptions-namespace names, and crd-unhonoured is not one/);
  assert.notEqual((await create("nightly-1")).code, 0, "still denied");

  // In the honoured namespace: the matching pod is admitted, with the warning kubectl prints; another is not.
  assert.equal((await cluster.apply(exception(EXCEPTIONS_NS))).code, 0);
  await until("the exception sets the rule aside", async () => (await create("nightly-1")).code === 0);
  const admitted = await create("nightly-2");
  assert.equal(admitted.code, 0, admitted.stderr);
  assert.match(
    admitted.stderr,
    /Warning: set aside by PolicyException crd-exceptions\/legacy-nightly: image "registry\.example\.com\/legacy\/report:1" .*violates policy no-legacy rules\[0\]: legacy images are retired/,
  );
  const other = await create("adhoc");
  assert.notEqual(other.code, 0);
  assert.match(other.stderr, /legacy images are retired/);
  await until("Ready=True", async () => (await exceptionReady(EXCEPTIONS_NS))?.status === "True");

  // Deleted: the rule denies again.
  assert.equal((await cluster.kubectl(["delete", "policyexceptions.imprimatur.dev", "legacy-nightly", "-n", EXCEPTIONS_NS])).code, 0);
  await until("the deleted exception no longer applies", async () => (await create("nightly-1")).code !== 0);
  assert.equal((await cluster.kubectl(["delete", "imagepolicy", "no-legacy"])).code, 0);
});

test("a misspelt field is kept by the apiserver and refused by the loader, not pruned into a weaker policy", async () => {
  assert.ok(server, "serve runs (earlier test)");
  const typo = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "typo" },
    spec: {
      namespaces: [NS],
      rules: [{ action: "allow", images: ["registry.example.com/typo/*"], attestor: [{ entries: [{ keyless: { subject: "*", issuer: "*" } }] }] }],
    },
  };
  const applied = await cluster.apply(JSON.stringify(typo));
  assert.equal(applied.code, 0, applied.stderr);
  const stored = await cluster.kubectl(["get", "imagepolicy", "typo", "-o", "jsonpath={.spec.rules[0].attestor[0].entries[0].keyless.subject}"]);
  assert.equal(stored.stdout, "*", "not pruned");
  await until("the loader refuses it", async () => (await readyCondition("typo"))?.reason === "InvalidPolicy");
  assert.equal(
    (await readyCondition("typo"))?.message,
    'spec.rules[0].attestor: unknown field "attestor"; did you mean "attestors"? (this policy is not in force)',
  );
});

test("a watch resumed from a compacted resource version (410 Gone) lists again, and changes still take effect", async () => {
  assert.ok(server, "serve runs (earlier test)");
  // The watches end every 25 s and resume from the last version seen; TrustRoots have been idle since an earlier
  // test, so their version is compacted by now or soon.
  for (let i = 0; !/policy resources: resource version expired; listing again/.test(await server.log()); i++) {
    if (i > 600) throw new Error(`no 410 Gone within two minutes; serve log:\n${(await server.log()).slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal((await cluster.apply(policy("after-relist", [{ action: "deny", images: ["registry.example.com/relisted"] }]))).code, 0);
  await until("a policy applied after the relist denies", async () => !(await admits("registry.example.com/relisted:1")));
});

test("a replica started while a policy is broken enforces the generation its status records", async () => {
  // Replicas come and go (rollouts, evictions): one started after a policy broke never loaded its good
  // generation, and must still enforce it, as the replicas that did keep doing.
  await server?.stop();
  server = undefined;
  const namespace = await cluster.kubectl(["get", "namespace", NS]);
  if (namespace.code !== 0) {
    assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
    assert.equal((await cluster.kubectl(["label", "namespace", NS, `kubernetes.io/metadata.name=${NS}`])).code, 0);
  }
  const denied = "registry.example.com/survivor:1";
  const replica = async () => {
    server = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds"]);
    const vwc = validatingWebhookConfiguration(server, {
      name: "imprimatur-crds",
      rules: [webhookRule("pods")],
      namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": NS } },
    });
    assert.equal((await cluster.apply(vwc)).code, 0);
    // The earlier replica is stopped: any answer at all (allowed or denied) comes from this one.
    await untilWebhookActive(cluster, podYaml("probe", NS, [denied]), (p) => p.code === 0 || /denied the request/.test(p.stderr));
  };
  const status = async () => {
    const res = await cluster.kubectl(["get", "imagepolicy", "survivor", "-o", "json"]);
    assert.equal(res.code, 0, res.stderr);
    return (JSON.parse(res.stdout) as { status?: { conditions?: Condition[]; inForce?: { generation?: number; document?: string } } }).status ?? {};
  };

  // Replica A: generation 1 comes into force, and Ready=True records it.
  assert.equal((await cluster.apply(policy("survivor", [{ action: "deny", images: ["registry.example.com/survivor"] }]))).code, 0);
  await replica();
  await until("generation 1 denies", async () => !(await admits(denied)));
  await until("Ready=True", async () => (await readyCondition("survivor"))?.status === "True");

  // Generation 2 does not compile: generation 1 stays in force on replica A.
  assert.equal((await cluster.apply(policy("survivor", [{ action: "deny", images: ["[registry.example.com/survivor"] }]))).code, 0);
  await until("Ready=False", async () => (await readyCondition("survivor"))?.status === "False");
  assert.equal(await admits(denied), false);
  const before = await status();
  assert.match(before.conditions?.[0]?.message ?? "", /\(generation 1 stays in force\)$/);

  // Replica A goes; replica B starts while the policy is broken. It still denies, and says why, as A did.
  await server!.stop();
  server = undefined;
  await replica();
  assert.equal(await admits(denied), false, "the new replica enforces generation 1 from the status");
  const after = await status();
  assert.equal(after.inForce?.generation, 1, "Ready=True recorded generation 1 and its policy");
  assert.deepEqual(JSON.parse(after.inForce?.document ?? "{}").spec.rules, [{ action: "deny", images: ["registry.example.com/survivor"] }]);
  const ready = after.conditions?.find((c) => c.type === "Ready");
  assert.equal(ready?.observedGeneration, 2);
  assert.match(ready?.message ?? "", /^spec\.rules\[0\]\.images\[0\]: invalid image pattern .*\(generation 1 stays in force\)$/);
  assert.deepEqual(after, before, "the new replica reaches the verdict the status already holds");

  // Fixed on replica B: the new generation is in force and recorded.
  assert.equal((await cluster.apply(policy("survivor", [{ action: "deny", images: ["registry.example.com/survivor2"] }]))).code, 0);
  await until("generation 3 in force", async () => (await admits(denied)) && !(await admits("registry.example.com/survivor2:1")));
  await until("generation 3 recorded", async () => (await status()).inForce?.generation === 3);
});
