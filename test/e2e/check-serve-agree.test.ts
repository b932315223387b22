// `check` says what `serve` does: the same manifests, policies (image rules, digest pinning, signatures, a
// PodRestriction bound by namespace label), --profile and namespace labels go through `imprimatur check` and
// through the /mutate and /validate of a running `imprimatur serve` (a real process), as kube-apiserver calls
// them, and every verdict, message, warning and patch is compared.
//
// No registry is reachable from either (the images name 127.0.0.1:1, where nothing listens): check is offline by
// design, and serve then cannot resolve tags or fetch signatures. So a tag under a pinning rule is denied by both
// (check: digestVerify; serve: /mutate cannot pin it and /validate denies it the same way), neither pins anything,
// and an image that needs signatures is "unverified" for check and denied by serve, which fails closed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { renderReason, type Violation } from "../../src/core/decision.ts";
import { imprimatur } from "../support/cli-process.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";

const REGISTRY = "127.0.0.1:1";
const DIGEST = `sha256:${"0123456789abcdef".repeat(4)}`;

function pem(): string {
  const { publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return (publicKey.export({ type: "spki", format: "pem" }) as string)
    .trim()
    .split("\n")
    .map((l) => `                  ${l}`)
    .join("\n");
}

const POLICIES = () => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: shop-images}
spec:
  namespaces: [default, secure]
  rules:
    - action: deny
      images: ["*:latest"]
      message: pin a version
    - action: allow
      images: ["${REGISTRY}/*"]
  default: deny
  defaultMessage: only images from our registry may run
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: payments-pinned}
spec:
  namespaces: [payments]
  rules:
    - action: allow
      images: ["${REGISTRY}/payments/*"]
      digestMutate: true
      digestVerify: true
  default: deny
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed-releases}
spec:
  namespaces: [releases]
  rules:
    - action: allow
      images: ["${REGISTRY}/releases/*"]
      attestors:
        - entries:
            - staticKey:
                key: |
${pem()}
  default: deny
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: enforce-restricted}
binding:
  namespaceSelector:
    matchLabels: {pod-security.imprimatur.dev/enforce: restricted}
spec:
  profile: restricted
`;

const NAMESPACES = `default: {}
secure: {pod-security.imprimatur.dev/enforce: restricted}
payments: {}
releases: {}
`;

const HARDENED_CONTAINER = `securityContext: {runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}`;

/** Pods and Deployments across the namespaces: allowed, denied by image rules, by pinning, by the profiles, unverified. */
const MANIFESTS = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: web, image: "${REGISTRY}/web:1.4"}]
---
apiVersion: v1
kind: Pod
metadata: {name: latest, namespace: default}
spec:
  containers: [{name: web, image: "${REGISTRY}/web:latest"}, {name: side, image: "docker.io/library/busybox:1.36"}]
---
apiVersion: v1
kind: Pod
metadata: {name: privileged, namespace: default}
spec:
  containers: [{name: app, image: "${REGISTRY}/app:2", securityContext: {privileged: true}}]
---
apiVersion: v1
kind: Pod
metadata: {name: root, namespace: secure}
spec:
  containers: [{name: app, image: "${REGISTRY}/app:2"}]
---
apiVersion: v1
kind: Pod
metadata: {name: hardened, namespace: secure}
spec:
  containers: [{name: app, image: "${REGISTRY}/app:2", ${HARDENED_CONTAINER}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: checkout, namespace: payments}
spec:
  selector: {matchLabels: {app: checkout}}
  template:
    metadata: {labels: {app: checkout}}
    spec:
      containers: [{name: app, image: "${REGISTRY}/payments/checkout:3.1"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ledger, namespace: payments}
spec:
  selector: {matchLabels: {app: ledger}}
  template:
    metadata: {labels: {app: ledger}}
    spec:
      containers: [{name: app, image: "${REGISTRY}/payments/ledger@${DIGEST}"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hardened-web, namespace: secure}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "${REGISTRY}/web:1.4", ${HARDENED_CONTAINER}}]
---
apiVersion: v1
kind: Pod
metadata: {name: release, namespace: releases}
spec:
  containers: [{name: app, image: "${REGISTRY}/releases/app@${DIGEST}"}]
`;

interface CheckResult {
  kind: string;
  name: string;
  namespace: string;
  result: string;
  violations: Array<{ policy: string; policyKind?: string; rule: string; image?: string; field?: string; message: string }>;
  unverified?: Array<{ policy: string; rule: string; image: string }>;
  warnings: string[];
}

interface ReviewResponse {
  allowed: boolean;
  status?: { message: string };
  warnings?: string[];
  patch?: string;
}

let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-check-serve-"));
  await mkdir(join(dir, "policies"));
  await writeFile(join(dir, "policies", "policies.yaml"), POLICIES());
  await writeFile(join(dir, "namespaces.yaml"), NAMESPACES);
  // serve may connect to 127.0.0.1:1 (and finds nothing there) only when the registry is listed for it.
  await writeFile(
    join(dir, "registries.yaml"),
    `apiVersion: imprimatur.dev/v1alpha1\nkind: RegistryConfig\nregistries: [{host: "${REGISTRY}", allowLocalAddresses: true}]\n`,
  );
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const RESOURCES: Record<string, { group: string; version: string; resource: string }> = {
  Pod: { group: "", version: "v1", resource: "pods" },
  Deployment: { group: "apps", version: "v1", resource: "deployments" },
};

/** The AdmissionReview kube-apiserver sends for creating `object` in `namespace` (it fills metadata.namespace in). */
function review(object: Record<string, unknown>, namespace: string) {
  const kind = object.kind as string;
  const r = RESOURCES[kind]!;
  const metadata: Record<string, unknown> = { ...(object.metadata as Record<string, unknown>), namespace };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: randomUUID(),
      kind: { group: r.group, version: r.version, kind },
      resource: r,
      requestKind: { group: r.group, version: r.version, kind },
      name: metadata.name,
      namespace,
      operation: "CREATE",
      userInfo: { username: "alice", groups: ["system:authenticated"] },
      dryRun: false,
      object: { ...object, metadata },
    },
  };
}

async function ask(server: ImprimaturProcess, path: "/mutate" | "/validate", body: unknown): Promise<ReviewResponse> {
  const res = await postJson(`${server.baseUrl}${path}`, server.ca, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body as { response: ReviewResponse }).response;
}

/**
 * Runs `manifests` through `check` and through a `serve` started with the same flags; asserts they agree on each
 * object and returns check's results, with "KIND/NAME in NAMESPACE: RESULT" for each.
 */
async function compare(flags: string[], manifests: string): Promise<{ results: CheckResult[]; verdicts: string[] }> {
  const server = await startImprimatur([...flags, "--registries", join(dir, "registries.yaml")]);
  try {
    const file = join(dir, `${randomUUID()}.yaml`);
    await writeFile(file, manifests);
    const checked = await imprimatur(["check", ...flags, "-f", file, "-o", "json"]);
    assert.ok(checked.code === 0 || checked.code === 1, checked.stderr);
    const results = JSON.parse(checked.stdout).results as CheckResult[];
    const objects = parseAllDocuments(manifests).map((d) => d.toJS() as Record<string, unknown>);
    assert.equal(results.length, objects.length);

    const verdicts: string[] = [];
    for (const [i, object] of objects.entries()) {
      const c = results[i]!;
      const what = `${c.kind}/${c.name} in ${c.namespace}`;
      const body = review(object, c.namespace);
      const mutated = await ask(server, "/mutate", body);
      // Offline nothing is pinned; with no registry to ask, serve pins nothing either.
      assert.equal(mutated.patch, undefined, `${what}: /mutate patched it, check cannot`);
      const validated = await ask(server, "/validate", body);
      const admitted = mutated.allowed && validated.allowed;
      verdicts.push(`${what}: ${c.result}`);

      if (c.result === "allowed") {
        assert.ok(admitted, `${what}: check allows it, serve denies it: ${mutated.status?.message ?? validated.status?.message}`);
        assert.deepEqual(validated.warnings ?? [], c.warnings, what);
      } else if (c.result === "denied") {
        assert.equal(validated.allowed, false, `${what}: check denies it, /validate allows it`);
        assert.equal(
          validated.status?.message,
          renderReason(c.violations.map(({ policyKind, ...v }): Violation => ({ ...v, ...(policyKind ? { kind: policyKind as "PodRestriction" } : {}) }))),
          what,
        );
        assert.equal(admitted, false);
      } else {
        // Unverified: check cannot verify the signatures; serve could not either (no registry) and fails closed.
        assert.equal(c.result, "unverified", what);
        assert.equal(validated.allowed, false, `${what}: unverified by check, admitted by serve`);
        for (const u of c.unverified ?? []) {
          assert.ok(
            validated.status?.message.includes(`image "${u.image}"`) &&
              validated.status.message.includes(`denied by policy ${u.policy} ${u.rule}: its signatures could not be checked`),
            `${what}: ${validated.status?.message}`,
          );
        }
      }
    }
    return { results, verdicts };
  } finally {
    await server.stop();
  }
}

test("check and a running serve give every object the same verdict, messages, warnings and patches", async () => {
  // The same flags for both: the policy folder, a shipped profile on top of it, the namespace labels.
  const flags = ["--policies", join(dir, "policies"), "--profile", "baseline", "--namespaces", join(dir, "namespaces.yaml")];
  const { results, verdicts } = await compare(flags, MANIFESTS);
  // The inputs reach every kind of verdict.
  assert.deepEqual(verdicts, [
    "Pod/web in default: allowed",
    "Pod/latest in default: denied",
    "Pod/privileged in default: denied",
    "Pod/root in secure: denied",
    "Pod/hardened in secure: allowed",
    "Deployment/checkout in payments: denied",
    "Deployment/ledger in payments: allowed",
    "Deployment/hardened-web in secure: allowed",
    "Pod/release in releases: unverified",
  ]);
  const byName = new Map(results.map((r) => [r.name, r]));
  assert.deepEqual(
    byName.get("privileged")!.violations.map((v) => `${v.policy} ${v.rule}`),
    ["profile-baseline baseline/privileged"],
  );
  assert.ok(
    byName.get("root")!.violations.some((v) => v.policy === "enforce-restricted"),
    "the PodRestriction bound by namespace label judges pods in secure",
  );
  assert.deepEqual(
    byName.get("checkout")!.violations.map((v) => `${v.policy} ${v.rule}`),
    ["payments-pinned rules[0].digestVerify"],
  );
});

test("without --policies both judge with the embedded default policy, and --profile adds to it", async () => {
  const pods = `apiVersion: v1
kind: Pod
metadata: {name: floating}
spec:
  containers: [{name: app, image: "${REGISTRY}/app", ${HARDENED_CONTAINER}}]
---
apiVersion: v1
kind: Pod
metadata: {name: versioned}
spec:
  containers: [{name: app, image: "${REGISTRY}/app:2", ${HARDENED_CONTAINER}}]
---
apiVersion: v1
kind: Pod
metadata: {name: loose}
spec:
  containers: [{name: app, image: "${REGISTRY}/app:2"}]
`;
  const { results, verdicts } = await compare(["--profile", "restricted"], pods);
  assert.deepEqual(verdicts, ["Pod/floating in default: denied", "Pod/versioned in default: allowed", "Pod/loose in default: denied"]);
  assert.deepEqual(
    results[0]!.violations.map((v) => `${v.policy} ${v.rule}`),
    ["pinned-versions rules[1]"],
  );
});
