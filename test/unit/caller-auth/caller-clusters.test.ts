// Clusters sharing one server: policies scoped with spec.clusters apply to their clusters' callers only, and the
// remote backends' answers are cached per cluster. Through the real HTTPS server, with callers told apart by
// their bearer tokens, and a test ImageReview backend standing in for a vendor's scanner.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "node:https";
import { stringify } from "yaml";
import { DecisionCache } from "../../../src/backends/decision-cache.ts";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { coversCluster } from "../../../src/core/cluster-scope.ts";
import { isClusterScoped, policiesForCluster } from "../../../src/core/policy-set/cluster-policies.ts";
import { UNAUTHENTICATED } from "../../../src/audit/caller.ts";
import { subjectOfObject } from "../../../src/core/admission-subject.ts";
import { allow } from "../../../src/core/decision.ts";
import type { AdmissionCall } from "../../../src/engine/admission-call.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { parseCallerTokens, tokenDigest } from "../../../src/caller-auth/caller-tokens.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";
import { podReview } from "../../support/admission.ts";
import { randomToken } from "../../support/caller-credentials.ts";
import { startTestApp, type TestApp } from "../../support/in-process-app.ts";
import { startTestBackend, type TestBackend } from "../../support/test-imagereview-backend.ts";
import { validateSubject } from "../../support/engine-review.ts";

const POLICIES = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: everywhere }
spec:
  rules:
    - { action: deny, images: ["*/forbidden-everywhere*"], message: "forbidden in every cluster" }
    - { action: allow, images: ["*"] }
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: prod-only-registry }
spec:
  clusters: [prod]
  rules:
    - { action: allow, images: ["registry.example.com/*"] }
  default: deny
  defaultMessage: "prod runs images from registry.example.com only"
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: { name: staging-no-privileged }
spec:
  clusters: [staging, qa]
  spec:
    containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }]
`;

describe("policies scoped to clusters", () => {
  test("spec.clusters is compiled for both kinds; absent means every cluster", () => {
    const parsed = parsePolicyText(POLICIES, "inline.yaml");
    assert.deepEqual(parsed.errors, []);
    const set = parsed.policies;
    assert.deepEqual(
      set.ImagePolicy.map((p) => [p.name, p.clusters]),
      [
        ["everywhere", undefined],
        ["prod-only-registry", ["prod"]],
      ],
    );
    assert.deepEqual(set.PodRestriction[0]!.clusters, ["staging", "qa"]);
    assert.equal(isClusterScoped(set), true);
    const names = (cluster: string | undefined) => {
      const s = policiesForCluster(set, cluster);
      return [...s.ImagePolicy, ...s.PodRestriction].map((p) => p.name);
    };
    assert.deepEqual(names("prod"), ["everywhere", "prod-only-registry"]);
    assert.deepEqual(names("qa"), ["everywhere", "staging-no-privileged"]);
    assert.deepEqual(names("dev"), ["everywhere"]);
    assert.deepEqual(names(undefined), ["everywhere"], "a caller with no cluster sees only what is scoped to none");
    assert.equal(coversCluster({}, undefined), true);
    assert.equal(coversCluster({ clusters: ["prod"] }, undefined), false);
  });

  test("one policy of either kind naming clusters makes the set cluster-scoped: a caller elsewhere is not judged by it", () => {
    const image = (name: string, clusters?: string) =>
      `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: { name: ${name} }\nspec:\n${clusters ? `  clusters: [${clusters}]\n` : ""}  rules: [{ action: allow, images: ['*'] }]\n`;
    const pods = (name: string, clusters?: string) =>
      `apiVersion: imprimatur.dev/v1alpha1\nkind: PodRestriction\nmetadata: { name: ${name} }\nspec:${clusters ? `\n  clusters: [${clusters}]\n` : " {}\n"}`;
    const scoped = (...documents: string[]) => {
      const parsed = parsePolicyText(documents.join("---\n"), "inline.yaml");
      assert.deepEqual(parsed.errors, []);
      const set = parsed.policies;
      const seenByDev = policiesForCluster(set, "dev");
      return { scoped: isClusterScoped(set), dev: [...seenByDev.ImagePolicy, ...seenByDev.PodRestriction].map((p) => p.name) };
    };
    assert.deepEqual(scoped(image("a"), image("b"), pods("c")), { scoped: false, dev: ["a", "b", "c"] });
    assert.deepEqual(scoped(image("a"), image("prod", "prod")), { scoped: true, dev: ["a"] }, "one ImagePolicy of two");
    assert.deepEqual(scoped(image("prod", "prod"), image("qa", "qa"), pods("c")), { scoped: true, dev: ["c"] }, "every ImagePolicy");
    assert.deepEqual(scoped(image("a"), pods("c"), pods("prod", "prod")), { scoped: true, dev: ["a", "c"] }, "one PodRestriction of two");
    assert.deepEqual(scoped(image("a"), pods("prod", "prod"), pods("qa", "qa")), { scoped: true, dev: ["a"] }, "every PodRestriction");
  });

  test("an empty or malformed clusters list is a load error naming the field", () => {
    const image = parsePolicyText(
      "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: { name: p }\nspec:\n  clusters: []\n  rules: [{ action: allow, images: ['*'] }]\n",
      "i.yaml",
    );
    assert.match(image.errors.map((e) => `${e.path}: ${e.message}`).join("\n"), /spec\.clusters/);
    const pods = parsePolicyText("apiVersion: imprimatur.dev/v1alpha1\nkind: PodRestriction\nmetadata: { name: p }\nspec:\n  clusters: []\n", "p.yaml");
    assert.match(pods.errors.map((e) => `${e.path}: ${e.message}`).join("\n"), /spec\.clusters: must not be empty; leave it out for every cluster/);
    const notStrings = parsePolicyText("apiVersion: imprimatur.dev/v1alpha1\nkind: PodRestriction\nmetadata: { name: p }\nspec:\n  clusters: [1]\n", "p.yaml");
    assert.match(notStrings.errors.map((e) => `${e.path}: ${e.message}`).join("\n"), /spec\.clusters\[0\]: must be a string/);
  });

  test("in-process callers (check, imprimatur test) apply every policy; a server's caller only its cluster's", async () => {
    const engine = await buildEngine({
      config: structuredClone(DEFAULT_SERVER_CONFIG),
      policies: parsePolicyText(POLICIES, "inline.yaml").policies,
      offline: true,
    });
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "default" },
      spec: { containers: [{ name: "c", image: "docker.io/library/nginx:1", securityContext: { privileged: true } }] },
    };
    const plan = subjectOfObject(pod);
    assert.ok(plan.review);
    const call = (extra: Partial<AdmissionCall> = {}): AdmissionCall => ({ endpoint: "check", deadline: Date.now() + 10_000, dryRun: true, ...extra });
    const failed = async (extra: Partial<AdmissionCall>) =>
      [...new Set((await validateSubject(engine, plan.subject, call(extra))).violations.map((v) => v.policy))].sort();
    assert.deepEqual(await failed({}), ["prod-only-registry", "staging-no-privileged"]);
    assert.deepEqual(await failed({ caller: UNAUTHENTICATED }), []);
    assert.deepEqual(await failed({ caller: { authentication: "token", name: "a", cluster: "qa" } }), ["staging-no-privileged"]);
    assert.deepEqual(await failed({ caller: { authentication: "client-certificate", name: "b", cluster: "prod" } }), ["prod-only-registry"]);
    await engine.close();
  });

  test("the decision cache keeps each cluster's answers apart", () => {
    const cache = new DecisionCache();
    const spec = { containers: [{ image: "nginx:1" }], annotations: {}, namespace: "default" };
    cache.set("scanner", spec, allow(), "prod");
    assert.equal(cache.get("scanner", spec, "prod")?.allowed, true);
    assert.equal(cache.get("scanner", spec, "staging"), undefined);
    assert.equal(cache.get("scanner", spec), undefined, "a caller with no cluster has entries of its own");
    cache.set("scanner", spec, allow());
    assert.equal(cache.get("scanner", spec)?.allowed, true);
  });
});

describe("one server, callers from two clusters", () => {
  let dir: string;
  let server: TestApp;
  let backend: TestBackend;
  const tokens = { prod: randomToken(), staging: randomToken() };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "imprimatur-clusters-"));
    await writeFile(join(dir, "policies.yaml"), POLICIES);
    // The scanner: a vendor's ImageReview service, which no real component here provides.
    const ca = await createCertificateAuthority("scanner CA");
    const cert = await issueCertificate(ca, { commonName: "scanner", ipAddresses: ["127.0.0.1"] });
    backend = await startTestBackend({ cert: cert.certPem, key: cert.keyPem }, "scanner-token");
    await writeFile(join(dir, "scanner-ca.crt"), ca.certPem);
    const kubeconfig = join(dir, "scanner.kubeconfig");
    await writeFile(
      kubeconfig,
      stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "scanner", cluster: { server: backend.url, "certificate-authority": join(dir, "scanner-ca.crt") } }],
        users: [{ name: "u", user: { token: "scanner-token" } }],
        contexts: [{ name: "c", context: { cluster: "scanner", user: "u" } }],
        "current-context": "c",
      }),
    );
    const callerTokens = parseCallerTokens(
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "CallerTokens",
        callers: [
          { name: "apiserver-prod", cluster: "prod", tokenSha256: tokenDigest(tokens.prod) },
          { name: "apiserver-staging", cluster: "staging", token: tokens.staging },
        ],
      }),
      "callers.yaml",
    );
    server = await startTestApp({
      policies: join(dir, "policies.yaml"),
      config: { ...structuredClone(DEFAULT_SERVER_CONFIG), backends: [{ name: "scanner", kubeconfig, timeoutMs: 5_000 }] },
      callers: { tokens: callerTokens, allowUnauthenticated: true },
    });
  });

  after(async () => {
    await server?.close();
    await backend?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const validate = (token: string | undefined, review: unknown): Promise<any> =>
    new Promise((resolve, reject) => {
      const data = JSON.stringify(review);
      const req = request(
        `${server.base}/validate`,
        {
          method: "POST",
          ca: server.ca,
          agent: false,
          headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")).response));
        },
      );
      req.on("error", reject);
      req.end(data);
    });

  const privilegedPod = (image: string) => {
    const review = podReview({ images: [image] });
    (review.request.object.spec.containers[0] as Record<string, unknown>).securityContext = { privileged: true };
    return review;
  };

  test("each cluster is judged by its own policies and those scoped to none", async () => {
    const dockerHub = podReview({ images: ["docker.io/library/nginx:1"] });
    const prodDenied = await validate(tokens.prod, dockerHub);
    assert.equal(prodDenied.allowed, false);
    assert.match(prodDenied.status.message, /prod runs images from registry\.example\.com only/);
    assert.equal((await validate(tokens.staging, dockerHub)).allowed, true);
    assert.equal((await validate(undefined, dockerHub)).allowed, true, "a caller with no cluster is not judged by cluster-scoped policies");

    assert.equal((await validate(tokens.prod, privilegedPod("registry.example.com/app:1"))).allowed, true);
    const stagingDenied = await validate(tokens.staging, privilegedPod("registry.example.com/app:1"));
    assert.equal(stagingDenied.allowed, false);
    assert.match(stagingDenied.status.message, /staging-no-privileged/);

    for (const token of [tokens.prod, tokens.staging, undefined]) {
      const everywhere = await validate(token, podReview({ images: ["registry.example.com/forbidden-everywhere:1"] }));
      assert.match(everywhere.status.message, /forbidden in every cluster/);
    }
  });

  test("the scanner's answers are cached per cluster", async () => {
    const review = podReview({ images: ["registry.example.com/cached-per-cluster:1"] });
    const asked = () => backend.reviews.filter((r) => r.spec.containers.some((c) => c.image.includes("cached-per-cluster"))).length;
    assert.equal((await validate(tokens.prod, review)).allowed, true);
    assert.equal((await validate(tokens.prod, review)).allowed, true);
    assert.equal(asked(), 1, "prod's second admission is answered from the cache");
    assert.equal((await validate(tokens.staging, review)).allowed, true);
    assert.equal(asked(), 2, "staging does not get prod's cached answer");
    await validate(tokens.staging, review);
    await validate(undefined, review);
    assert.equal(asked(), 3, "nor does a caller with no cluster");
  });
});
