// The RBAC of deploy/ is exactly what `imprimatur serve` uses, on a real etcd + kube-apiserver v1.20:
//   - with a token of the imprimatur ServiceAccount (TokenRequest API) and nothing else, the real `serve` with the
//     Deployment's flags starts: it creates the TLS Secret, takes the Lease, writes the caBundle into both webhook
//     configurations, loads a policy custom resource and writes its status, records an Event for an invalid one;
//   - the rules that identity holds (SelfSubjectRulesReview, minus what every authenticated user holds) are the
//     listed verbs and nothing more: it cannot list secrets anywhere, create pods, or touch other objects by name.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, stringify } from "yaml";
import { startKubeCluster, type KubeCluster, type KubectlResult } from "../support/kube-cluster.ts";
import { freePorts } from "../support/ports.ts";
import { getText } from "../support/https-client.ts";
import { teardown } from "../support/teardown.ts";

const DEPLOY = fileURLToPath(new URL("../../deploy/", import.meta.url));
const OVERLAY = `${DEPLOY}overlays/kube-1.20`;
const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));

let cluster: KubeCluster;
let token: string;
let dir: string;

type Doc = Record<string, any>;

/** kubectl as the imprimatur ServiceAccount (the admin kubeconfig's server and CA, the account's token). */
function asImprimatur(args: string[], input?: string): Promise<KubectlResult> {
  return cluster.kubectl([`--token=${token}`, ...args], input === undefined ? {} : { input });
}

async function tokenFor(namespace: string, account: string): Promise<string> {
  const request = { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } };
  const res = await cluster.kubectl(["create", "--raw", `/api/v1/namespaces/${namespace}/serviceaccounts/${account}/token`, "-f", "-"], {
    input: JSON.stringify(request),
  });
  assert.equal(res.code, 0, res.stderr);
  return (JSON.parse(res.stdout) as { status: { token: string } }).status.token;
}

/** Every (group, resource, name, verb) a token may use in `namespace`, as SelfSubjectRulesReview reports them. */
async function rules(asToken: string, namespace: string): Promise<Set<string>> {
  const review = { apiVersion: "authorization.k8s.io/v1", kind: "SelfSubjectRulesReview", spec: { namespace } };
  const res = await cluster.kubectl([`--token=${asToken}`, "create", "-o", "json", "-f", "-"], { input: JSON.stringify(review) });
  assert.equal(res.code, 0, res.stderr);
  const status = (JSON.parse(res.stdout) as { status: { resourceRules: Doc[]; incomplete: boolean } }).status;
  assert.equal(status.incomplete, false);
  const out = new Set<string>();
  for (const rule of status.resourceRules)
    for (const group of rule.apiGroups ?? [""])
      for (const resource of rule.resources ?? [])
        for (const name of rule.resourceNames ?? ["*"]) for (const verb of rule.verbs) out.add(`${group}|${resource}|${name}|${verb}`);
  return out;
}

const expand = (group: string, resources: string[], verbs: string[], names = ["*"]) =>
  resources.flatMap((r) => names.flatMap((n) => verbs.map((v) => `${group}|${r}|${n}|${v}`)));

/** What `serve --policy-crds --tls-secret imprimatur/imprimatur-tls --webhook-configuration imprimatur` calls. */
const CLUSTER_WIDE = [
  ...expand("", ["namespaces"], ["get", "list", "watch"]),
  ...expand("", ["secrets", "serviceaccounts"], ["get"]),
  ...expand("", ["events"], ["create"]),
  ...expand(
    "imprimatur.dev",
    ["imagepolicies", "podrestrictions", "trustroots", "namespacedimagepolicies", "namespacedpodrestrictions", "policyexceptions"],
    ["list", "watch"],
  ),
  ...expand(
    "imprimatur.dev",
    [
      "imagepolicies/status",
      "podrestrictions/status",
      "trustroots/status",
      "namespacedimagepolicies/status",
      "namespacedpodrestrictions/status",
      "policyexceptions/status",
    ],
    ["patch"],
  ),
  ...expand("admissionregistration.k8s.io", ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"], ["get", "update"], ["imprimatur"]),
  // The background scan: running pods, and one report per pod in either format.
  ...expand("", ["pods"], ["list", "watch"]),
  ...expand("wgpolicyk8s.io", ["policyreports", "clusterpolicyreports"], ["get", "list", "create", "update", "delete"]),
  ...expand("openreports.io", ["reports", "clusterreports"], ["get", "list", "create", "update", "delete"]),
  // Who may use break-glass.
  ...expand("authorization.k8s.io", ["subjectaccessreviews"], ["create"]),
];
const IN_OWN_NAMESPACE = [
  ...expand("", ["secrets"], ["create"]),
  ...expand("", ["secrets"], ["update"], ["imprimatur-tls"]),
  ...expand("coordination.k8s.io", ["leases"], ["create"]),
  ...expand("coordination.k8s.io", ["leases"], ["get", "update"], ["imprimatur"]),
  ...expand("coordination.k8s.io", ["leases"], ["get", "update"], ["imprimatur-scan"]),
];

before(async () => {
  cluster = await startKubeCluster();
  dir = mkdtempSync(join(tmpdir(), "imprimatur-rbac-"));
  const applied = await cluster.kubectl(["apply", "-k", OVERLAY]);
  assert.equal(applied.code, 0, applied.stderr);
  // The harness runs no controller-manager: the CRDs must be established before custom resources are created.
  const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
  // An identity with no binding at all: what it may do, every authenticated user may.
  assert.equal((await cluster.kubectl(["create", "serviceaccount", "nobody", "-n", "imprimatur"])).code, 0);
  token = await tokenFor("imprimatur", "imprimatur");
});

after(() => teardown([() => cluster?.stop(), () => dir && rmSync(dir, { recursive: true, force: true })]));

test("the ServiceAccount holds exactly the listed rules, cluster-wide and in its own namespace", async () => {
  const nobody = await tokenFor("imprimatur", "nobody");
  for (const [namespace, expected] of [
    ["default", CLUSTER_WIDE],
    ["imprimatur", [...CLUSTER_WIDE, ...IN_OWN_NAMESPACE]],
  ] as const) {
    const everyone = await rules(nobody, namespace);
    const granted = [...(await rules(token, namespace))].filter((r) => !everyone.has(r)).sort();
    assert.deepEqual(granted, [...expected].sort(), `rules in ${namespace}`);
  }
});

test("what it must not do is refused by the apiserver", async () => {
  const refused: string[][] = [
    ["list", "secrets", "--all-namespaces"],
    ["list", "secrets", "-n", "imprimatur"],
    ["watch", "secrets", "-n", "default"],
    ["create", "pods", "-n", "default"],
    ["create", "secrets", "-n", "default"],
    ["update", "secrets/other", "-n", "imprimatur"],
    ["delete", "secrets/imprimatur-tls", "-n", "imprimatur"],
    ["update", "validatingwebhookconfigurations/someone-else"],
    ["create", "validatingwebhookconfigurations"],
    ["update", "leases/kube-scheduler", "-n", "kube-system"],
    ["create", "imagepolicies.imprimatur.dev"],
    ["update", "imagepolicies.imprimatur.dev/x"],
    ["get", "pods", "-n", "default"],
  ];
  for (const args of refused) {
    const res = await asImprimatur(["auth", "can-i", ...args]);
    assert.equal(res.stdout.trim(), "no", `can-i ${args.join(" ")}: ${res.stdout}${res.stderr}`);
  }
  for (const args of [
    ["get", "secrets/any", "-n", "team-a"],
    ["update", "secrets/imprimatur-tls", "-n", "imprimatur"],
    ["watch", "namespaces"],
  ]) {
    assert.equal((await asImprimatur(["auth", "can-i", ...args])).stdout.trim(), "yes", args.join(" "));
  }
  // And for real: a list of secrets is Forbidden.
  const listed = await asImprimatur(["get", "secrets", "-n", "imprimatur"]);
  assert.notEqual(listed.code, 0);
  assert.match(listed.stderr, /forbidden/);
});

test("serve with the Deployment's flags runs on exactly that RBAC: TLS Secret, Lease, caBundle, policy status, Events, background scan", async (t) => {
  const deployment = (await build()).find((d) => d.kind === "Deployment")!;
  const args: string[] = deployment.spec.template.spec.containers[0].args;
  const stateDir = join(dir, "state");
  const kubeconfig = join(dir, "imprimatur.kubeconfig");
  // The admin kubeconfig with the account's token in place of the admin's.
  writeFileSync(kubeconfig, readFileSync(cluster.kubeconfig, "utf8").replace(/token: .*/, `token: ${JSON.stringify(token)}`), { mode: 0o600 });
  const [port, metricsPort] = await freePorts(2);
  const flags = args.slice(1).map((a, i, all) => (all[i - 1] === "--state-dir" ? stateDir : all[i - 1] === "--metrics-port" ? String(metricsPort) : a));
  const logPath = join(dir, "serve.log");
  const log = createWriteStream(logPath);
  const child: ChildProcess = spawn(process.execPath, [BIN, "serve", ...flags, "--host", "127.0.0.1", "--port", String(port), "--kubeconfig", kubeconfig], {
    env: { ...process.env, POD_NAME: "imprimatur-rbac-test", POD_NAMESPACE: "imprimatur" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  t.after(() =>
    teardown([
      async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
        await exited;
      },
      () => log.end(),
    ]),
  );
  const serveLog = () => readFileSync(logPath, "utf8");

  const until = async <T>(what: string, probe: () => Promise<T | undefined>): Promise<T> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) assert.fail(`serve exited (${child.exitCode}) while waiting for ${what}:\n${serveLog()}`);
      const value = await probe().catch(() => undefined);
      if (value !== undefined) return value;
      if (Date.now() > deadline) assert.fail(`no ${what} within 60 s; serve log:\n${serveLog()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };

  const secret = await until("TLS Secret", async () => {
    const res = await cluster.kubectl(["get", "secret", "imprimatur-tls", "-n", "imprimatur", "-o", "json"]);
    return res.code === 0 ? (JSON.parse(res.stdout) as { data: Record<string, string> }) : undefined;
  });
  const ca = Buffer.from(secret.data["ca.crt"]!, "base64").toString("utf8");
  // The Deployment runs with --require-policies: not ready until a policy is in force.
  const policy = (name: string, spec: Doc) => stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name }, spec });
  await until("/readyz 503 without a policy", async () => {
    const ready = await getText(`https://127.0.0.1:${port}/readyz`, ca);
    return ready.status === 503 && ready.text.includes("no policy is in force yet") ? true : undefined;
  });
  const valid = await cluster.apply(policy("pinned", { rules: [{ action: "deny", images: ["*:latest"] }], default: "allow" }));
  assert.equal(valid.code, 0, valid.stderr);
  await until("/readyz 200", async () => ((await getText(`https://127.0.0.1:${port}/readyz`, ca)).status === 200 ? true : undefined));
  for (const kind of ["validatingwebhookconfiguration", "mutatingwebhookconfiguration"]) {
    await until(`${kind} caBundle`, async () => {
      const got = await cluster.kubectl(["get", kind, "imprimatur", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}"]);
      return got.stdout === secret.data["ca.crt"] ? true : undefined;
    });
  }
  const holder = await cluster.kubectl(["get", "lease", "imprimatur", "-n", "imprimatur", "-o", "jsonpath={.spec.holderIdentity}"]);
  assert.match(holder.stdout, /imprimatur-rbac-test/);

  await until("Ready=True on the valid policy", async () => {
    const got = await cluster.kubectl(["get", "imagepolicy", "pinned", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']);
    return got.stdout === "True" ? true : undefined;
  });
  const invalid = await cluster.apply(policy("broken", { rules: [{ action: "allow", images: ["*"] }], breakGlass: { allowed: true, ticketPattern: "([" } }));
  assert.equal(invalid.code, 0, invalid.stderr);
  // Valid for the CRD's OpenAPI schema, refused by the compile step (the ticket pattern is no regular expression).
  await until("an Event on the invalid policy", async () => {
    const got = await cluster.kubectl(["get", "events", "--all-namespaces", "--field-selector", "involvedObject.name=broken", "-o", "name"]);
    return got.stdout.trim() !== "" ? true : undefined;
  });
  // The background scan: the scan Lease is taken, every pod is listed and judged, the reports are listed.
  await until("the background scan's first full scan", async () => (/"background scan: every pod judged"/.test(serveLog()) ? true : undefined));
  const scanHolder = await cluster.kubectl(["get", "lease", "imprimatur-scan", "-n", "imprimatur", "-o", "jsonpath={.spec.holderIdentity}"]);
  assert.match(scanHolder.stdout, /imprimatur-rbac-test/);
  assert.doesNotMatch(serveLog(), /forbidden|\b403\b/i, "no call was refused for want of a permission");
});

async function build(): Promise<Doc[]> {
  const res = await cluster.kubectl(["kustomize", OVERLAY]);
  assert.equal(res.code, 0, res.stderr);
  return parseAllDocuments(res.stdout).map((d) => d.toJS() as Doc);
}
