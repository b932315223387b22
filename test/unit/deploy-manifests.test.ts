// The committed manifests under deploy/ agree with the code and with each other: the webhook configurations with
// what `serve` renders, the ImagePolicyWebhook files with their renderers, the Deployment with the restricted Pod
// Security profile, and every name one object uses for another (Service, Secret, webhook configurations).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments } from "yaml";
import { parseCallerTokens, tokenDigest } from "../../src/caller-auth/caller-tokens.ts";
import { ConfigError } from "../../src/config/config-error.ts";
import {
  renderAdmissionConfiguration,
  renderImagePolicyKubeconfig,
  renderMutatingWebhookConfiguration,
  renderValidatingWebhookConfiguration,
} from "../../src/server/webhook-manifests.ts";

const DEPLOY = fileURLToPath(new URL("../../deploy/", import.meta.url));

type Doc = Record<string, any>;
function docs(path: string): Doc[] {
  return parseAllDocuments(readFileSync(DEPLOY + path, "utf8")).map((d) => d.toJS() as Doc);
}
function one(path: string, kind: string, name?: string): Doc {
  const found = docs(path).filter((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
  assert.equal(found.length, 1, `${path} holds one ${kind}${name ? ` ${name}` : ""}`);
  return found[0]!;
}
/** `--flag value` pairs of an argument list, repeatable flags collected. */
function flags(args: string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (let i = 1; i < args.length; i++) {
    const flag = args[i]!;
    assert.match(flag, /^--[a-z-]+$/, `argument ${i} is a flag: ${flag}`);
    const next = args[i + 1];
    const value = next !== undefined && !next.startsWith("--") ? (i++, next) : "";
    out.set(flag, [...(out.get(flag) ?? []), value]);
  }
  return out;
}

const deployment = one("base/core/deployment.yaml", "Deployment", "imprimatur");
const container = deployment.spec.template.spec.containers[0];
const service = one("base/core/service.yaml", "Service", "imprimatur");
const endpoint = { baseUrl: "https://unused.example", caPem: "unused" };

for (const [kind, render, path] of [
  ["ValidatingWebhookConfiguration", renderValidatingWebhookConfiguration, "/validate"],
  ["MutatingWebhookConfiguration", renderMutatingWebhookConfiguration, "/mutate"],
] as const) {
  test(`${kind}: what serve renders, but through the Service and with kube-system and imprimatur excluded`, () => {
    const committed = one("base/core/webhooks.yaml", kind, "imprimatur");
    const rendered = parse(render(endpoint)) as Doc;
    assert.equal(committed.apiVersion, rendered.apiVersion);
    assert.equal(committed.webhooks.length, rendered.webhooks.length);
    for (const [i, webhook] of committed.webhooks.entries()) {
      const { clientConfig, namespaceSelector, ...rest } = webhook;
      const { clientConfig: renderedClient, ...renderedRest } = rendered.webhooks[i];
      assert.deepEqual(rest, renderedRest, "rules, sideEffects, failurePolicy, timeout and reinvocation as rendered");
      assert.equal(new URL(renderedClient.url).pathname, path);
      // The Service, never a URL on a .svc name: kube-apiserver does not resolve cluster DNS.
      assert.deepEqual(clientConfig, { service: { namespace: "imprimatur", name: service.metadata.name, path, port: 443 } });
      assert.deepEqual(namespaceSelector, {
        matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system", "imprimatur"] }],
      });
    }
  });
}

test("the Service sends 443 to the container's https port, and the certificate names the Service", () => {
  assert.equal(service.metadata.namespace, "imprimatur");
  assert.deepEqual(
    service.spec.ports.map((p: Doc) => [p.name, p.port, p.targetPort]),
    [
      ["https", 443, "https"],
      ["metrics", 9090, "metrics"],
    ],
  );
  assert.deepEqual(
    container.ports.map((p: Doc) => [p.name, p.containerPort]),
    [
      ["https", 8443],
      ["metrics", 9090],
    ],
  );
  assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
  assert.deepEqual(flags(container.args).get("--tls-san"), [`${service.metadata.name}.${service.metadata.namespace}.svc`]);
});

test("serve's command line: self-managed TLS in the Secret the Role may write, policies from custom resources", () => {
  assert.equal(container.args[0], "serve");
  const f = flags(container.args);
  assert.deepEqual(
    [...f.keys()].sort(),
    [
      "--background-scan",
      "--metrics-port",
      "--policy-crds",
      "--require-policies",
      "--scan-exclude-namespace",
      "--state-dir",
      "--tls-san",
      "--tls-secret",
      "--webhook-configuration",
    ].sort(),
  );
  // The scan leaves out the namespaces the webhooks leave out.
  assert.deepEqual(f.get("--scan-exclude-namespace"), ["kube-system", "imprimatur"]);
  assert.deepEqual(f.get("--metrics-port"), ["9090"]);
  assert.deepEqual(f.get("--policy-crds"), [""]);
  // A fresh install refuses reviews until deploy/default-policies (or another policy) is applied.
  assert.deepEqual(f.get("--require-policies"), [""]);
  const [secretNamespace, secretName] = f.get("--tls-secret")![0]!.split("/");
  assert.equal(secretNamespace, "imprimatur");
  const role = one("base/self-managed-tls/rbac.yaml", "Role", "imprimatur-self-managed-tls");
  assert.equal(role.metadata.namespace, secretNamespace);
  assert.ok(role.rules.some((r: Doc) => r.resources.includes("secrets") && r.resourceNames?.includes(secretName) && r.verbs.includes("update")));
  const webhookRole = one("base/self-managed-tls/rbac.yaml", "ClusterRole", "imprimatur-self-managed-tls");
  assert.deepEqual(webhookRole.rules[0].resourceNames, f.get("--webhook-configuration"));
  for (const kind of ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"])
    one("base/core/webhooks.yaml", kind, f.get("--webhook-configuration")![0]);
  // The state folder is a volume: the root filesystem is read-only.
  const stateDir = f.get("--state-dir")![0];
  assert.ok(container.volumeMounts.some((m: Doc) => m.mountPath === stateDir));
});

test("the pod meets the restricted Pod Security Standard, runs as 65532 on a read-only root, writes only to volumes", () => {
  const pod = deployment.spec.template.spec;
  assert.deepEqual(
    { runAsNonRoot: pod.securityContext.runAsNonRoot, runAsUser: pod.securityContext.runAsUser, seccomp: pod.securityContext.seccompProfile },
    { runAsNonRoot: true, runAsUser: 65532, seccomp: { type: "RuntimeDefault" } },
  );
  const sc = container.securityContext;
  assert.equal(sc.runAsNonRoot, true);
  assert.equal(sc.runAsUser, 65532);
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.deepEqual(sc.capabilities, { drop: ["ALL"] });
  assert.deepEqual(sc.seccompProfile, { type: "RuntimeDefault" });
  assert.equal(pod.hostNetwork ?? false, false);
  for (const volume of pod.volumes) assert.deepEqual(Object.keys(volume).sort(), ["emptyDir", "name"], `${volume.name} is an emptyDir`);
  assert.deepEqual(container.volumeMounts.map((m: Doc) => m.mountPath).sort(), ["/tmp", "/var/lib/imprimatur"]);
  assert.ok(container.resources.requests.cpu && container.resources.requests.memory && container.resources.limits.memory);
});

test("two replicas spread over nodes, probes over HTTPS, the pod's name and namespace from the downward API", () => {
  assert.equal(deployment.spec.replicas, 2);
  const anti = deployment.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm;
  assert.equal(anti.topologyKey, "kubernetes.io/hostname");
  assert.deepEqual(anti.labelSelector.matchLabels, deployment.spec.selector.matchLabels);
  for (const [probe, path] of [
    ["livenessProbe", "/healthz"],
    ["readinessProbe", "/readyz"],
    ["startupProbe", "/healthz"],
  ]) {
    assert.deepEqual(container[probe!].httpGet, { path, port: "https", scheme: "HTTPS" }, probe);
  }
  const env = Object.fromEntries(container.env.map((e: Doc) => [e.name, e.valueFrom?.fieldRef?.fieldPath ?? e.value]));
  assert.deepEqual(env, {
    POD_NAME: "metadata.name",
    POD_NAMESPACE: "metadata.namespace",
    HOME: "/tmp",
    // What it does inside the memory limit: test/e2e/deployment-heap.test.ts.
    NODE_OPTIONS: "--max-semi-space-size=32 --max-old-space-size-percentage=75",
  });
  // The drain (5 s by default) fits in the grace period.
  assert.ok(deployment.spec.template.spec.terminationGracePeriodSeconds >= 10);
});

test("the PodDisruptionBudget keeps one replica; the v1.20 overlay's differs only in its API version", () => {
  const pdb = one("base/disruption-budget/pod-disruption-budget.yaml", "PodDisruptionBudget");
  assert.equal(pdb.apiVersion, "policy/v1");
  assert.equal(pdb.spec.minAvailable, 1);
  assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
  const old = one("overlays/kube-1.20/pod-disruption-budget.yaml", "PodDisruptionBudget");
  assert.deepEqual({ ...old, apiVersion: "policy/v1" }, pdb);
  assert.equal(old.apiVersion, "policy/v1beta1");
});

test("the imprimatur namespace carries the name label the webhooks exclude it by, also on v1.20", () => {
  const ns = one("base/core/namespace.yaml", "Namespace", "imprimatur");
  assert.equal(ns.metadata.labels["kubernetes.io/metadata.name"], "imprimatur");
});

test("cert-manager overlay: serve reads the mounted certificate, the CA injector fills both caBundles", () => {
  const patch = one("overlays/cert-manager/deployment-tls-files.yaml", "Deployment", "imprimatur");
  const c = patch.spec.template.spec.containers[0];
  const f = flags(c.args);
  assert.equal(f.get("--tls-secret"), undefined);
  const mount = c.volumeMounts[0].mountPath;
  assert.deepEqual([f.get("--tls-cert"), f.get("--tls-key")], [[`${mount}/tls.crt`], [`${mount}/tls.key`]]);
  const serving = one("overlays/cert-manager/certificates.yaml", "Certificate", "imprimatur-serving");
  assert.equal(patch.spec.template.spec.volumes[0].secret.secretName, serving.spec.secretName);
  assert.ok(serving.spec.dnsNames.includes("imprimatur.imprimatur.svc"));
  for (const kind of ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]) {
    const w = one("overlays/cert-manager/webhooks-inject-ca.yaml", kind, "imprimatur");
    assert.equal(w.metadata.annotations["cert-manager.io/inject-ca-from"], `imprimatur/${serving.metadata.name}`);
  }
  // Every other flag as in the base.
  const base = flags(container.args);
  for (const flag of ["--metrics-port", "--policy-crds", "--require-policies", "--state-dir"]) assert.deepEqual(f.get(flag), base.get(flag), flag);
});

test("ImagePolicyWebhook overlay: the node files are what serve renders, at the Service's fixed address the certificate names", () => {
  const admission = parse(readFileSync(DEPLOY + "overlays/imagepolicywebhook/control-plane/admission-configuration.yaml", "utf8"));
  const kubeconfigPath = admission.plugins[0].configuration.imagePolicy.kubeConfigFile;
  assert.deepEqual(admission, parse(renderAdmissionConfiguration({ kubeconfigPath })));
  const kubeconfig = parse(readFileSync(DEPLOY + "overlays/imagepolicywebhook/control-plane/imagepolicy-kubeconfig.yaml", "utf8"));
  const address = one("overlays/imagepolicywebhook/service-imagereview.yaml", "Service").spec.clusterIP;
  const rendered = parse(renderImagePolicyKubeconfig({ baseUrl: `https://${address}`, caPem: "unused" }));
  // The CA is a file on the node (copied from the Secret), where serve renders it inline.
  const { "certificate-authority": caFile, ...cluster } = kubeconfig.clusters[0].cluster;
  const { "certificate-authority-data": _data, ...renderedCluster } = rendered.clusters[0].cluster;
  assert.deepEqual(
    { ...kubeconfig, clusters: [{ ...kubeconfig.clusters[0], cluster }] },
    { ...rendered, clusters: [{ ...rendered.clusters[0], cluster: renderedCluster }] },
  );
  assert.equal(caFile.replace(/[^/]+$/, ""), kubeconfigPath.replace(/[^/]+$/, ""), "the CA file sits beside the kubeconfig");
  const patch = one("overlays/imagepolicywebhook/deployment-imagereview-address.yaml", "Deployment", "imprimatur");
  const f = flags(patch.spec.template.spec.containers[0].args);
  assert.deepEqual(f.get("--tls-san"), [...flags(container.args).get("--tls-san")!, address]);
  for (const [flag, values] of flags(container.args)) if (flag !== "--tls-san") assert.deepEqual(f.get(flag), values, flag);
});

/** JSON 6902 `add` operations applied to a copy of `target`, as kustomize applies them: at an index, or at the end (`-`). */
function applyAdds(target: Doc, ops: Doc[]): Doc {
  const copy = structuredClone(target);
  for (const op of ops) {
    assert.equal(op.op, "add", JSON.stringify(op));
    const keys = op.path.split("/").slice(1) as string[];
    const list = keys.slice(0, -1).reduce((at: Doc, key: string) => at[key], copy);
    assert.ok(Array.isArray(list), `${op.path} is in a list of the Deployment`);
    const at = keys.at(-1)!;
    list.splice(at === "-" ? list.length : Number(at), 0, structuredClone(op.value));
  }
  return copy;
}

/** A patch of deploy/caller-auth, read as kustomize reads it (YAML 1.1: defaultMode 0440 is octal). */
function callerAuthPatch(path: string): Doc[] {
  return parse(readFileSync(DEPLOY + path, "utf8"), { version: "1.1" }) as Doc[];
}

/** Where deploy/caller-auth's patches leave serve: its flags, the Secret's keys it reads, and the mount. */
function callerAuthPatched(path: string) {
  const patched = applyAdds(deployment, callerAuthPatch(path));
  const pod = patched.spec.template.spec;
  const c = pod.containers[0];
  const volume = pod.volumes.find((v: Doc) => v.secret);
  const mount = c.volumeMounts.find((m: Doc) => m.name === volume.name);
  // Kubernetes expands $(NAME) in args from the container's environment.
  const fromSecret = new Map<string, string>(
    c.env.filter((e: Doc) => e.valueFrom?.secretKeyRef).map((e: Doc) => [`$(${e.name})`, `${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}`]),
  );
  return { patched, f: flags(c.args), volume, mount, fromSecret, secretName: volume.secret.secretName as string };
}

test("caller-auth token patch: --caller-tokens from the mounted Secret, --cluster-name from its cluster-name; every other flag as in the base", () => {
  const { patched, f, volume, mount, fromSecret, secretName } = callerAuthPatched("caller-auth/deployment-caller-tokens.yaml");
  assert.equal(secretName, "imprimatur-callers");
  assert.deepEqual(volume.secret, { secretName, defaultMode: 0o440 }, "readable by the pod's group (fsGroup) only");
  assert.deepEqual(mount, { name: volume.name, mountPath: "/etc/imprimatur/callers", readOnly: true });
  assert.deepEqual(f.get("--caller-tokens"), [`${mount.mountPath}/caller-tokens.yaml`]);
  assert.deepEqual(
    f.get("--cluster-name")!.map((v) => fromSecret.get(v)),
    [`${secretName}/cluster-name`],
  );
  for (const [flag, values] of flags(container.args)) assert.deepEqual(f.get(flag), values, flag);
  assert.equal(f.get("--allow-unauthenticated"), undefined, "callers without the token are refused");
  // Only the Secret is added: the emptyDir volumes and the rest of the pod are the base's.
  assert.deepEqual(patched.spec.template.spec.volumes.slice(1), deployment.spec.template.spec.volumes);
  assert.deepEqual(patched.spec.template.spec.containers[0].securityContext, container.securityContext);
});

test("caller-auth client-certificate patch: --client-ca, its allowed names and --cluster-name from the same Secret", () => {
  const { f, mount, fromSecret, secretName } = callerAuthPatched("caller-auth/deployment-client-ca.yaml");
  assert.equal(secretName, "imprimatur-callers");
  assert.deepEqual(f.get("--client-ca"), [`${mount.mountPath}/client-ca.crt`]);
  assert.deepEqual(
    f.get("--client-ca-allowed-names")!.map((v) => fromSecret.get(v)),
    [`${secretName}/client-ca-allowed-names`],
  );
  assert.deepEqual(
    f.get("--cluster-name")!.map((v) => fromSecret.get(v)),
    [`${secretName}/cluster-name`],
  );
  assert.equal(f.get("--client-ca-any-name"), undefined, "only the named callers of the CA");
  for (const [flag, values] of flags(container.args)) assert.deepEqual(f.get(flag), values, flag);
});

for (const path of ["caller-auth/deployment-caller-tokens.yaml", "caller-auth/deployment-client-ca.yaml"]) {
  test(`${path}: applied before or after a patch that appends to the same lists, the same Deployment (kustomize v2.0 applies both orders)`, () => {
    const ops = callerAuthPatch(path);
    // Arguments right after `serve`, everything else first in its list: never at an end another patch appends to.
    for (const op of ops)
      assert.match(op.path, /^\/spec\/template\/spec\/(containers\/0\/args\/[1-9]\d*|containers\/0\/(env|volumeMounts)\/0|volumes\/0)$/, op.path);
    const appending: Doc[] = [
      { op: "add", path: "/spec/template/spec/containers/0/args/-", value: "--tls-sync-interval" },
      { op: "add", path: "/spec/template/spec/containers/0/env/-", value: { name: "X", value: "x" } },
      { op: "add", path: "/spec/template/spec/containers/0/volumeMounts/-", value: { name: "y", mountPath: "/y" } },
      { op: "add", path: "/spec/template/spec/volumes/-", value: { name: "y", emptyDir: {} } },
    ];
    assert.deepEqual(applyAdds(applyAdds(deployment, ops), appending), applyAdds(applyAdds(deployment, appending), ops));
  });
}

test("caller-auth CallerTokens example: refused until its placeholder is the token's SHA-256, then one caller", () => {
  const text = readFileSync(DEPLOY + "caller-auth/caller-tokens.yaml", "utf8");
  assert.throws(
    () => parseCallerTokens(text, "caller-tokens.yaml"),
    (e: unknown) => e instanceof ConfigError && e.problems.length === 1 && e.problems[0]!.path === "callers[0].tokenSha256",
  );
  const digest = tokenDigest("a-token-of-the-apiserver-0123456789");
  const tokens = parseCallerTokens(text.replace("REPLACE-WITH-THE-SHA256-OF-THE-TOKEN", digest), "caller-tokens.yaml");
  assert.deepEqual([...tokens], [[digest, { name: "kube-apiserver", cluster: "my-cluster" }]]);
});

test("caller-auth control-plane files: both webhook plugins read one kubeconfig, whose user is named for the webhooks' Service", () => {
  const admission = parse(readFileSync(DEPLOY + "caller-auth/control-plane/admission-configuration.yaml", "utf8")) as Doc;
  assert.equal(admission.kind, "AdmissionConfiguration");
  assert.deepEqual(
    admission.plugins.map((p: Doc) => [p.name, p.configuration.apiVersion, p.configuration.kind]),
    [
      ["ValidatingAdmissionWebhook", "apiserver.config.k8s.io/v1", "WebhookAdmissionConfiguration"],
      ["MutatingAdmissionWebhook", "apiserver.config.k8s.io/v1", "WebhookAdmissionConfiguration"],
    ],
  );
  const [file, ...others] = new Set(admission.plugins.map((p: Doc) => p.configuration.kubeConfigFile as string));
  assert.deepEqual(others, []);
  assert.equal(file, "/etc/kubernetes/imprimatur/webhook-kubeconfig.yaml", "an absolute path, as kube-apiserver needs");
  const kubeconfig = parse(readFileSync(DEPLOY + "caller-auth/control-plane/webhook-kubeconfig.yaml", "utf8")) as Doc;
  // kube-apiserver looks a service webhook up as NAME.NAMESPACE.svc:PORT, and for port 443 also without the port.
  const hosts = new Set<string>();
  for (const kind of ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"])
    for (const w of one("base/core/webhooks.yaml", kind, "imprimatur").webhooks) {
      const { name, namespace, port } = w.clientConfig.service;
      hosts.add(port === 443 ? `${name}.${namespace}.svc` : `${name}.${namespace}.svc:${port}`);
    }
  assert.deepEqual(
    kubeconfig.users.map((u: Doc) => u.name),
    [...hosts],
  );
  assert.deepEqual([...hosts], [`${service.metadata.name}.${service.metadata.namespace}.svc`]);
  assert.deepEqual(kubeconfig.users[0].user, { token: "REPLACE-WITH-THE-TOKEN" });
});

test("deploy/default-policies ships the embedded default policies as they are, every file of them", () => {
  const shipped = readdirSync(fileURLToPath(new URL("../../policies/default/", import.meta.url))).sort();
  const kustomization = parse(readFileSync(DEPLOY + "default-policies/kustomization.yaml", "utf8")) as Doc;
  assert.deepEqual([...kustomization.resources].sort(), shipped);
  for (const file of shipped) {
    assert.equal(
      readFileSync(DEPLOY + `default-policies/${file}`, "utf8"),
      readFileSync(fileURLToPath(new URL(`../../policies/default/${file}`, import.meta.url)), "utf8"),
      `deploy/default-policies/${file} is policies/default/${file}`,
    );
  }
});

// docs/install.md describes what deploy/base installs: its RBAC table and the Deployment's command line must be
// the manifests' own, or a reader grants (or audits) something else than what runs.
const INSTALL_DOC = readFileSync(fileURLToPath(new URL("../../docs/install.md", import.meta.url)), "utf8");

test("docs/install.md's RBAC table has a row for every rule deploy/base grants, with its group, verbs and names", () => {
  const section = INSTALL_DOC.slice(INSTALL_DOC.indexOf("## RBAC"), INSTALL_DOC.indexOf("\n## ", INSTALL_DOC.indexOf("## RBAC") + 1));
  const rows = section
    .split("\n")
    .filter((l) => l.startsWith("| `"))
    .map((l) => l.split("|").map((c) => c.trim()));
  const files = readdirSync(DEPLOY + "base", { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".yaml"));
  const all = files.flatMap((f) => docs(`base/${f}`));
  // The roles bound to serve's ServiceAccount (not the aggregated roles for users of namespaced policies).
  const bound = new Set(
    all
      .filter(
        (d) =>
          (d.kind === "RoleBinding" || d.kind === "ClusterRoleBinding") &&
          (d.subjects as Doc[]).some((s) => s.kind === "ServiceAccount" && s.name === "imprimatur"),
      )
      .map((d) => `${d.roleRef.kind}/${d.roleRef.name}`),
  );
  const rules = all
    .filter((d) => (d.kind === "Role" || d.kind === "ClusterRole") && bound.has(`${d.kind}/${d.metadata.name}`))
    .flatMap((role) => (role.rules as Doc[]).map((rule) => ({ role: `${role.kind}/${role.metadata.name}`, scope: role.kind, rule })));
  assert.ok(rules.length >= 10, `rules found: ${rules.length}`);
  const missing: string[] = [];
  for (const { role, scope, rule } of rules)
    for (const resource of rule.resources as string[])
      for (const group of rule.apiGroups as string[]) {
        const fits = rows.some(([, resources, groupCell, where, verbs]) => {
          if (!resources!.split(", ").includes(`\`${resource}\``) || groupCell !== `\`${JSON.stringify(group).slice(1, -1) || '""'}\``) return false;
          if ((scope === "ClusterRole") !== where!.startsWith("cluster")) return false;
          const names = (rule.resourceNames as string[] | undefined) ?? [];
          const namesSaid = names.every((n) => verbs!.includes(`of \`${n}\``) || where!.includes(`named \`${n}\``));
          return namesSaid && (rule.verbs as string[]).every((v) => verbs!.includes(`\`${v}\``));
        });
        if (!fits)
          missing.push(`${role}: ${group || '""'} ${resource} ${(rule.verbs as string[]).join(",")}${rule.resourceNames ? ` of ${rule.resourceNames}` : ""}`);
      }
  assert.deepEqual(missing, [], "rules the table does not give");
});

test("docs/install.md gives the Deployment's command line as it is", () => {
  const args = (deployment.spec.template.spec.containers[0].args as string[]).join(" ");
  assert.ok(INSTALL_DOC.includes(`\`${args}\``), `docs/install.md says: ${args}`);
});
