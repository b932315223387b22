// The examples in README.md, examples/README.md and docs/*.md are what the code does:
// - every ```yaml block is loaded by the loader of its kind (policies, PolicyTest, ServerConfig, RegistryConfig,
//   CallerTokens) and must be accepted; Kubernetes-side objects (webhook configurations, kubeconfigs,
//   AdmissionConfiguration, RBAC, kustomizations) are read as `check` reads manifests (YAML as kubectl reads it,
//   object metadata), since no loader of ours takes them.
//   A block may be marked on the last non-blank line before its fence:
//     <!-- example: partial -->  an excerpt (a few fields, placeholders such as `…`): checked as YAML only, and it
//                                must really be partial (a block that loads whole loses the marker);
//     <!-- example: invalid -->  shown to be refused: the loader of its kind must refuse it.
// - every offline command of a ```sh block (imprimatur's check, test, profiles, completion, version, help,
//   verify-bundle; the CRD generator's --check) runs through the real CLI, bin/imprimatur.js with this Node.js, in
//   the repository; it must end with 0 or 1 (never a usage error, an error or a crash), and the output the page
//   shows must be the output it prints. Every other command is in SKIPPED_BY_DESIGN with the reason it cannot run
//   here (a cluster, a registry, the network, a host's services, a long-running server); the test asserts that
//   list is exactly the commands the pages show, so a new command has to be classified. In the prose, a code
//   span `npx imprimatur …` is a command to type too.
//   Shown output is either `# ` comment lines right after the command (an excerpt: each line, in order, is a line
//   of the output; a comment line indented past "# " continues the line above, wrapped for the page) or an
//   unlabelled ``` block right after the ```sh block (the whole output of the block's first command, line by
//   line). In both, `…` stands for any text and a line that is only `…` for any lines: pages elide long
//   messages, digests and timestamps with it, so the test normalises nothing else (only trailing spaces of
//   table cells are dropped, which a page cannot show). Commands run in the repository, so paths print as the
//   pages show them.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { readKubeYaml } from "../../src/config/kube-yaml.ts";
import { manifestObjects } from "../../src/cli/manifests.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { BIN, REPO_ROOT } from "../support/cli-process.ts";
import { docPages, fences, readPage, type Fence } from "../support/docs.ts";
import { kindLoaderProblems } from "../support/kind-loaders.ts";
import { generateSigningKey } from "../support/signer/keys.ts";
import { createMockSigstore } from "../support/signer/mock-sigstore.ts";

const MARKERS = ["partial", "invalid"];

// ---------------------------------------------------------------------------------------------------------
// YAML examples

/**
 * Where the examples are loaded from: a folder holding the files they name (keys, a trusted root, TLS files, the
 * PolicyTest's manifests and configs), laid out as policy-tests/NAME/ so that the PolicyTest example's
 * `../../policies/…` reaches the repository's policies (linked).
 */
let scratch: string;
let here: string;
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), "imprimatur-docs-examples-"));
  here = join(scratch, "policy-tests", "docs-example");
  await mkdir(join(here, "keys"), { recursive: true });
  await mkdir(join(here, "deploy"));
  await symlink(join(REPO_ROOT, "policies"), join(scratch, "policies"));
  await writeFile(join(here, "keys", "release.pub"), generateSigningKey().publicKeyPem);
  await writeFile(join(here, "keys", "ops.pub"), generateSigningKey().publicKeyPem);
  await writeFile(join(here, "corp-trusted-root.json"), JSON.stringify((await createMockSigstore({ name: "corp" })).trustedRoot));
  const ca = await createCertificateAuthority("docs examples CA");
  const client = await issueCertificate(ca, { commonName: "puller", client: true });
  await writeFile(join(here, "ca.pem"), ca.certPem);
  await writeFile(join(here, "client.pem"), client.certPem);
  await writeFile(join(here, "client-key.pem"), client.keyPem);
  await writeFile(join(here, "server-config.yaml"), "apiVersion: imprimatur.dev/v1alpha1\nkind: ServerConfig\n");
  await writeFile(join(here, "namespaces.yaml"), "shop: { env: prod }\n");
  await writeFile(join(here, "pods.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: { name: root }\nspec: { containers: [{ name: app, image: app:1.0 }] }\n");
});
after(() => rm(scratch, { recursive: true, force: true }));

/** What the loader of the document's kind says against it: nothing when it is accepted. */
async function problemsOf(doc: unknown, where: string): Promise<string[]> {
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return ["not a mapping"];
  const { apiVersion, kind } = doc as { apiVersion?: unknown; kind?: unknown };
  if (typeof apiVersion !== "string" || typeof kind !== "string") return ["has no apiVersion and kind: an excerpt (mark it <!-- example: partial -->)"];
  const problems = await kindLoaderProblems(doc as Record<string, unknown>, here, here);
  if (problems) return problems;
  if (apiVersion.includes("imprimatur")) return [`${kind}: no loader knows this kind`];
  // A Kubernetes-side object: read as the offline commands read manifests.
  const found: string[] = [];
  manifestObjects(JSON.stringify(doc), where, found);
  return found;
}

function yamlBlocks(): Fence[] {
  return docPages().flatMap((page) => fences(page).filter((f) => f.lang === "yaml" || f.lang === "yml"));
}

test("the pages mark blocks only with the markers this test knows", () => {
  for (const page of docPages())
    for (const f of fences(page)) if (f.marker !== undefined) assert.ok(MARKERS.includes(f.marker), `${page}:${f.line}: unknown marker "${f.marker}"`);
});

test("every YAML example in the docs loads with the loader of its kind, or is marked partial or invalid", async () => {
  const failures: string[] = [];
  const loadedKinds = new Set<string>();
  let refused = 0;
  for (const block of yamlBlocks()) {
    const where = `${block.page}:${block.line}`;
    const parsed = readKubeYaml(block.body);
    if (block.marker === "partial" || block.marker === undefined) {
      for (const e of parsed.errors) failures.push(`${where}: not valid YAML (document ${e.document}, line ${e.line}): ${e.message}`);
    }
    const problems: string[] = [];
    for (const { value } of parsed.documents) {
      for (const p of await problemsOf(value, where)) problems.push(p);
      if (block.marker === undefined) loadedKinds.add(String((value as { kind?: unknown }).kind));
    }
    if (block.marker === undefined) for (const p of problems) failures.push(`${where}: ${p}`);
    else if (block.marker === "partial" && parsed.errors.length === 0 && problems.length === 0)
      failures.push(`${where}: marked partial, but it loads whole: drop the marker`);
    else if (block.marker === "invalid") {
      if (parsed.errors.length === 0 && problems.length === 0) failures.push(`${where}: marked invalid, but its loader accepts it`);
      else refused++;
    }
  }
  assert.deepEqual(failures, []);
  assert.ok(refused > 0, "the example shown to be refused is refused");
  for (const kind of ["ImagePolicy", "PodRestriction", "TrustRoot", "PolicyTest", "ServerConfig", "RegistryConfig"])
    assert.ok(loadedKinds.has(kind), `some ${kind} example is loaded whole`);
});

// ---------------------------------------------------------------------------------------------------------
// Commands

/**
 * Commands the pages show that cannot run here, each with the reason. Exact: a command not listed runs (it
 * must be one this test can run), and a listed one the pages no longer show is an error.
 */
const SKIPPED_BY_DESIGN: Record<string, string> = {
  "npm ci && npx imprimatur serve": "a long-running server",
  "npm ci && npm test": "the whole test suite, with a cluster",
  "npm ci": "installs from the package registry (network)",
  "npx imprimatur serve --port 8443 --state-dir .state &": "a long-running server",
  [`curl -s --cacert .state/ca.crt https://127.0.0.1:8443/imagereview -d '{ "apiVersion": "imagepolicy.k8s.io/v1alpha1", "kind": "ImageReview", "spec": {"containers": [{"image": "nginx"}], "namespace": "default"}}'`]:
    "asks a running server",
  "kubectl get deploy -A -o yaml | npx imprimatur check -f -": "reads a cluster",
  "npx imprimatur serve --profile restricted": "a long-running server",
  "npx imprimatur serve --profile baseline": "a long-running server",
  "npx imprimatur serve": "a long-running server",
  "npx imprimatur install --registry registry.example.com/platform/imprimatur":
    "pushes to a registry and installs in a cluster (test/e2e/install.test.ts runs it on the small cluster)",
  "npx imprimatur serve --kubeconfig ~/.kube/config --registries registries.yaml --authfile auth.json": "a long-running server with a cluster",
  "kubectl apply -f .state/mutating-webhook.yaml -f .state/validating-webhook.yaml": "writes to a cluster",
  "npx imprimatur resolve registry.example.com/app:1.4": "asks a registry",
  "npx imprimatur verify --policies policies/ --authfile auth.json registry.example.com/app:1.4": "asks a registry",
  "imprimatur node-proxy --listen unix:///run/imprimatur/image.sock --runtime-endpoint unix:///run/containerd/containerd.sock --state-dir /var/lib/imprimatur/node-proxy":
    "a long-running proxy in front of a node's container runtime",
  "kube-apiserver ... --enable-admission-plugins=...,ImagePolicyWebhook --admission-control-config-file=/etc/kubernetes/imprimatur/admission-configuration.yaml":
    "a cluster's API server",
  "kubectl apply -f .state/mutating-webhook.yaml": "writes to a cluster",
  "kubectl apply -f .state/validating-webhook.yaml": "writes to a cluster",
  "imprimatur resolve registry.example.com/app:1.4 nginx:1.27": "asks a registry",
  "imprimatur resolve --authfile ~/.docker/config.json --registries registries.yaml IMAGE...": "asks a registry",
  "imprimatur resolve --platform linux/arm64 nginx:1.27": "asks a registry",
  "npm run image": "builds the server's image into build/ (minutes; its own tests build one)",
  'npm run image -- -o /tmp/img -t 0.1.0 --commit "$(git rev-parse HEAD)"': "builds the server's image (minutes; its own tests build one)",
  "skopeo copy --preserve-digests oci:build/image:0.1.0 docker://registry.example.com/imprimatur:0.1.0": "writes to a registry",
  "kubectl apply -k my-cluster": "writes to a cluster",
  "kubectl create clusterrolebinding oncall-break-glass --clusterrole=imprimatur-break-glass --group=oncall": "writes to a cluster",
  "kubectl -n imprimatur rollout status deployment imprimatur": "reads a cluster",
  "kubectl get validatingwebhookconfiguration imprimatur -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | head -c 40": "reads a cluster",
  "kubectl apply -k deploy/default-policies": "writes to a cluster",
  "kubectl wait --for condition=Established crd --all --timeout 60s": "reads a cluster",
  "kubectl get imagepolicies": "reads a cluster",
  "kubectl create rolebinding alice-admin --clusterrole=admin --user=alice -n team-a": "writes to a cluster",
  "kubectl --as=alice apply -f corp-only.yaml": "writes to a cluster",
  "kubectl --as=alice get nsimgpol -n team-a": "reads a cluster",
  "kubectl label namespace kube-system kubernetes.io/metadata.name=kube-system": "writes to a cluster",
  "kubectl delete validatingwebhookconfiguration imprimatur": "writes to a cluster",
  "kubectl delete mutatingwebhookconfiguration imprimatur": "writes to a cluster",
  "kubectl delete -k my-cluster": "writes to a cluster",
  "imprimatur node-proxy --listen unix:///run/imprimatur/image.sock --runtime-endpoint unix:///run/containerd/containerd.sock --state-dir /var/lib/imprimatur/node-proxy --metrics-address 127.0.0.1:9465":
    "a long-running proxy in front of a node's container runtime",
  "imprimatur node-proxy --listen unix:///run/imprimatur/image.sock --runtime-endpoint unix:///run/containerd/containerd.sock --state-dir /var/lib/imprimatur/node-proxy --policies /etc/imprimatur/policies --registries /etc/imprimatur/registries.yaml":
    "a long-running proxy in front of a node's container runtime, verifying its pulls",
  "imprimatur node-records --state-dir /var/lib/imprimatur/node-proxy": "reads a node's proxy records",
  "tar -xzf imprimatur-node-proxy-0.1.0-linux-x64.tar.gz -C /opt": "installs on a node (a release archive into /opt)",
  "ln -sfn /opt/imprimatur-node-proxy-0.1.0-linux-x64 /opt/imprimatur": "installs on a node",
  "install -d -m 0755 /etc/imprimatur": "installs on a node",
  "install -m 0644 /opt/imprimatur/systemd/node-proxy.env /etc/imprimatur/node-proxy.env": "installs on a node",
  "install -m 0644 /opt/imprimatur/systemd/imprimatur-node-proxy.service /etc/systemd/system/": "installs on a node",
  "systemctl daemon-reload": "a node's services",
  "systemctl enable --now imprimatur-node-proxy": "a node's services",
  "systemctl restart kubelet": "a node's services",
  "tar -xzf imprimatur-node-proxy-0.2.0-linux-x64.tar.gz -C /opt": "installs on a node",
  "ln -sfn /opt/imprimatur-node-proxy-0.2.0-linux-x64 /opt/imprimatur": "installs on a node",
  "systemctl restart imprimatur-node-proxy": "a node's services",
  "rm -rf /opt/imprimatur-node-proxy-0.1.0-linux-x64": "removes an installation from a node",
  "kubectl apply -k deploy/crds": "writes to a cluster",
  "imprimatur serve --policy-crds --kubeconfig ~/.kube/config": "a long-running server with a cluster",
  "kubectl apply -f policies/default/pinned-versions.yaml": "writes to a cluster",
  "kubectl get imagepolicy team-images -o yaml": "reads a cluster",
  "kubectl describe imagepolicy team-images": "reads a cluster",
  "kubectl get events -n default --field-selector involvedObject.name=team-images": "reads a cluster",
  "npm run crds": "rewrites deploy/crds/ in the working tree; `node scripts/generate-crds.ts --check` below runs the same generator without writing",
  "imprimatur verify --policies policies/ --authfile auth.json registry.example.com/app:1.4": "asks a registry",
  "imprimatur verify-bundle --bundle artifact.sigstore.json --certificate-identity https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1 --certificate-oidc-issuer https://token.actions.githubusercontent.com artifact.tar.gz":
    "names a user's bundle and artifact, not files of the repository (and keyless needs the public-good trust root)",
  "imprimatur verify-bundle --bundle artifact.sigstore.json --key release.pub --trusted-root corp-root.json artifact.tar.gz":
    "names a user's bundle, key, root and artifact, not files of the repository",
  "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out release.key": "makes a user's release key (test/unit/release/ reads such keys)",
  "openssl pkey -in release.key -pubout -out release.pub": "reads the user's release key",
  'imprimatur sign-image registry.example.com/platform/imprimatur@sha256:… --key release.key --source-revision "$(git rev-parse HEAD)"':
    "pushes to a registry (test/e2e/release-signing.test.ts runs it against one)",
  "kubectl kustomize my-self-verification > self-verification.yaml": "renders a user's overlay",
  "imprimatur verify --policies self-verification.yaml registry.example.com/platform/imprimatur@sha256:…": "asks a registry",
  "imprimatur audit --kubeconfig ~/.kube/config --policies self-verification.yaml -n imprimatur": "reads a cluster",
  'TOKEN="$(openssl rand -hex 32)"': "makes a user's caller token (test/e2e/install.test.ts makes one and installs with it)",
  'printf %s "$TOKEN" | sha256sum': "the digest of the user's token, made by the command above",
  "kubectl create namespace imprimatur": "writes to a cluster",
  "kubectl -n imprimatur create secret generic imprimatur-callers --from-file=caller-tokens.yaml --from-literal=cluster-name=my-cluster":
    "writes to a cluster (test/e2e/install.test.ts creates this Secret)",
};

/** imprimatur commands that run offline on the repository's files; any other must be in SKIPPED_BY_DESIGN. */
const OFFLINE_SUBCOMMANDS = ["check", "test", "convert", "profiles", "completion", "version", "help", "verify-bundle", "--help", "-h"];

interface ShownCommand {
  where: string;
  /** The command as one line: continuations joined, its trailing comment removed. */
  command: string;
  words: string[];
  /** The `# ` lines right after it: an excerpt of its output. */
  comments: string[];
  /** An unlabelled block right after the ```sh block, for the block's first command: its whole output. */
  output: string | undefined;
}

/** Shell words of `line` up to an unquoted comment, and the line without that comment. */
function shellWords(line: string): { words: string[]; command: string; open: boolean } {
  const words: string[] = [];
  let word: string | undefined;
  let quote: string | undefined;
  let i = 0;
  for (; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else word = (word ?? "") + c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= "";
    } else if (c === "#" && word === undefined) break;
    else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else word = (word ?? "") + c;
  }
  if (word !== undefined) words.push(word);
  return { words, command: line.slice(0, i).trim(), open: quote !== undefined };
}

function shownCommands(): ShownCommand[] {
  const out: ShownCommand[] = [];
  for (const page of docPages()) {
    const blocks = fences(page);
    blocks.forEach((block, b) => {
      if (block.lang !== "sh") return;
      const next = blocks[b + 1];
      const output = next && next.lang === "" && next.before.trim() === "" ? next.body : undefined;
      const lines = block.body.split("\n");
      let first = true;
      for (let i = 0; i < lines.length; i++) {
        let line = lines[i]!;
        if (line.trim() === "" || line.trimStart().startsWith("#")) continue;
        const start = i;
        // A backslash continues the line, and so does a quote still open (a JSON body over several lines).
        for (;;) {
          const more = line.endsWith("\\") ? line.slice(0, -1).trimEnd() : shellWords(line).open ? line : undefined;
          if (more === undefined || i + 1 >= lines.length) break;
          line = `${more} ${lines[++i]!.trim()}`;
        }
        const { words, command } = shellWords(line);
        const comments: string[] = [];
        while (i + 1 < lines.length && lines[i + 1]!.trimStart().startsWith("#")) {
          const text = lines[++i]!.trimStart().replace(/^# ?/, "");
          // Indented past "# ": the line above, wrapped for the page.
          if (/^\s/.test(text) && comments.length > 0) comments[comments.length - 1] += ` ${text.trim()}`;
          else comments.push(text);
        }
        out.push({ where: `${page}:${block.line + 1 + start}`, command, words, comments, output: first ? output : undefined });
        first = false;
      }
    });
    // In the prose, `npx imprimatur …` is a command to type (as in examples/README.md's table).
    const inFence = (n: number) => blocks.some((f) => n >= f.line && n <= f.endLine);
    readPage(page)
      .split("\n")
      .forEach((text, i) => {
        if (inFence(i + 1)) return;
        for (const m of text.matchAll(/`(npx imprimatur[^`]*)`/g)) {
          const { words, command } = shellWords(m[1]!);
          out.push({ where: `${page}:${i + 1}`, command, words, comments: [], output: undefined });
        }
      });
  }
  return out;
}

/** How the test runs a shown command, or undefined when it cannot. */
function runnable(words: readonly string[]): { argv: string[]; redirected: boolean } | undefined {
  let args = [...words];
  let redirected = false;
  if (args.length >= 2 && args[args.length - 2] === ">") {
    args = args.slice(0, -2); // its output goes to a file: run it, capturing the output instead
    redirected = true;
  }
  if (args.some((w) => ["|", "&", "&&", ";", ">", "<"].includes(w) || w.includes("$("))) return undefined;
  if (args[0] === "npx" && args[1] === "imprimatur") args = args.slice(1);
  // verify-bundle verifies files: it runs when the bundle it names is one of the repository's.
  const filesHere = args[1] !== "verify-bundle" || existsSync(join(REPO_ROOT, args[args.indexOf("--bundle") + 1] ?? ""));
  const offline = args[1] === undefined || OFFLINE_SUBCOMMANDS.includes(args[1]); // alone, it prints the overview
  if (args[0] === "imprimatur" && offline && filesHere) return { argv: [BIN, ...args.slice(1)], redirected };
  if (args[0] === "node" && /^scripts\/[\w-]+\.ts$/.test(args[1] ?? "") && args.includes("--check")) return { argv: args.slice(1), redirected };
  return undefined;
}

/** Whether `actual` (whole lines) is what `shown` shows: `…` any text within a line, a line `…` any lines. */
function wholeOutputMatches(shown: string[], actual: string[]): boolean {
  if (shown.length === 0) return actual.length === 0;
  const [first, ...rest] = shown;
  if (first === "…") return actual.some((_, i) => wholeOutputMatches(rest, actual.slice(i))) || wholeOutputMatches(rest, []);
  return actual.length > 0 && lineMatches(first!, actual[0]!) && wholeOutputMatches(rest, actual.slice(1));
}

function lineMatches(shown: string, actual: string): boolean {
  const pattern = shown
    .split("…")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${pattern}$`).test(actual);
}

/** Whether each shown line is a line of `actual`, in order. */
function excerptMatches(shown: string[], actual: string[]): string | undefined {
  let from = 0;
  for (const line of shown) {
    const at = actual.findIndex((a, i) => i >= from && lineMatches(line, a));
    if (at < 0) return line;
    from = at + 1;
  }
  return undefined;
}

const outputLines = (text: string) =>
  text
    .replace(/\n+$/, "")
    .split("\n")
    .map((l) => l.trimEnd());

test("every command the pages show runs here, or is skipped by design with its reason; the list is exact", () => {
  const shown = shownCommands();
  const notRunnable = [...new Set(shown.filter((c) => !runnable(c.words)).map((c) => c.command))].sort();
  assert.deepEqual(notRunnable, Object.keys(SKIPPED_BY_DESIGN).sort(), "classify each command: runnable offline, or SKIPPED_BY_DESIGN with the reason");
  for (const c of shown) if (runnable(c.words)) assert.ok(!(c.command in SKIPPED_BY_DESIGN), `${c.where}: ${c.command} runs; do not list it as skipped`);
});

test("every offline command the pages show exits 0 or 1 and prints the output they show", () => {
  const failures: string[] = [];
  const ran = new Map<string, { status: number | null; stdout: string; stderr: string }>();
  let count = 0;
  let compared = 0;
  for (const c of shownCommands()) {
    const run = runnable(c.words);
    if (!run) continue;
    let result = ran.get(c.command);
    if (!result) {
      const r = spawnSync(process.execPath, run.argv, { cwd: REPO_ROOT, encoding: "utf8", timeout: 120_000, env: { ...process.env, NO_COLOR: "1" } });
      result = { status: r.status, stdout: r.stdout, stderr: r.stderr };
      ran.set(c.command, result);
      count++;
    }
    if (result.status !== 0 && result.status !== 1) failures.push(`${c.where}: ${c.command}: exit ${result.status}\n${result.stderr}`);
    if (run.redirected && c.words.at(-1)!.endsWith(".json")) {
      try {
        JSON.parse(result.stdout);
      } catch {
        failures.push(`${c.where}: ${c.command}: the file it writes is named .json, but the output is not JSON`);
      }
    }
    const actual = outputLines(`${result.stdout}${result.stderr}`);
    if (c.comments.length > 0 || c.output !== undefined) compared++;
    if (c.comments.length > 0) {
      const missing = excerptMatches(c.comments, actual);
      if (missing !== undefined) failures.push(`${c.where}: ${c.command}: the page shows\n  ${missing}\nbut the output is\n  ${actual.join("\n  ")}`);
    }
    if (c.output !== undefined && !wholeOutputMatches(outputLines(c.output), actual))
      failures.push(`${c.where}: ${c.command}: the page shows\n  ${outputLines(c.output).join("\n  ")}\nbut the output is\n  ${actual.join("\n  ")}`);
  }
  assert.deepEqual(failures, []);
  assert.ok(count >= 5, `the pages' offline commands ran (${count})`);
  assert.ok(compared >= 2, `the output the pages show was compared (${compared} commands)`);
});

test("the output matcher: `…` is any text in a line and any lines on a line of its own", () => {
  assert.ok(lineMatches("a … c", "a b b c"));
  assert.ok(!lineMatches("a … c", "a b b d"));
  assert.ok(lineMatches("x (…)", "x (y)"));
  assert.ok(wholeOutputMatches(["a", "…", "d"], ["a", "b", "c", "d"]));
  assert.ok(wholeOutputMatches(["a", "…", "d"], ["a", "d"]));
  assert.ok(!wholeOutputMatches(["a", "d"], ["a", "b", "d"]));
  assert.equal(excerptMatches(["b", "d"], ["a", "b", "c", "d"]), undefined);
  assert.equal(excerptMatches(["d", "b"], ["a", "b", "c", "d"]), "b");
});
