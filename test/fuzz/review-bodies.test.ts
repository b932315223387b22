// Property-based tests of the three review endpoints (/validate, /mutate, /imagereview) through the real
// in-process HTTPS server. Every body gets an answer (a per-request timeout fails the property), never a 5xx:
// either a 4xx metav1.Status with a reason, or a well-formed review answer. Which one is decided independently
// of the server (the size limit, strict UTF-8, JSON.parse, the nesting depth, then the project's own parsers of
// the two wire formats), so a request those parsers cannot read is never allowed, and a readable one is never
// refused. One server for the whole file; a keep-alive agent that trusts its CA.
import { test, before, after, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { Agent, request } from "node:https";
import fc from "fast-check";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { EMBEDDED_POLICIES } from "../../src/policy/policy-set.ts";
import { ADMISSION_API_VERSIONS, ADMISSION_OPERATIONS, parseAdmissionReview } from "../../src/core/admission-review.ts";
import { checkImageReference } from "../../src/core/image-reference.ts";
import { IMAGE_REVIEW_API_VERSION, parseImageReview } from "../../src/core/image-review.ts";
import { MAX_JSON_DEPTH } from "../../src/server/http-body.ts";
import { imageReview, podReview } from "../support/admission.ts";
import { checkProperty, fuzzRuns } from "../support/fuzz.ts";
import { startTestApp, type TestApp } from "../support/in-process-app.ts";

const FILE = "test/fuzz/review-bodies.test.ts";
/** Small, so that bodies near and beyond the limit keep memory modest. */
const MAX_BYTES = 64 * 1024;
/** Longer than any answer takes on two busy cores; reaching it is a hang and fails the property. */
const ANSWER_TIMEOUT_MS = 20_000;

type Endpoint = "validate" | "mutate" | "imagereview";
const ENDPOINTS: readonly Endpoint[] = ["validate", "mutate", "imagereview"];
type Outcome = "allowed" | "denied" | "refused" | "too-large";

let server: TestApp;
let agent: Agent;

before(async () => {
  // The embedded policy denies `:latest` (explicit or implied) and allows the rest; the baseline profile, bound
  // cluster-wide, denies privileged pods: allowed and denied are both reachable from every base document.
  // Break-glass on the annotations alone: this server has no API to ask who may, and the bodies, not the
  // authorizer, are what is fuzzed here (who may is test/unit/engine/break-glass-access.test.ts and the e2e tests).
  const config = { ...DEFAULT_SERVER_CONFIG, maxRequestBytes: MAX_BYTES, breakGlass: { authorization: "None" as const, cacheTtlMs: 10_000 } };
  server = await startTestApp({ policies: EMBEDDED_POLICIES, profiles: ["baseline"], config });
  agent = new Agent({ keepAlive: true, maxSockets: 2, ca: server.ca });
});

after(async () => {
  agent?.destroy();
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
// The client: one POST, its status, content type and text; an answer that does not come in time is an error.

interface Answer {
  status: number;
  contentType: string | undefined;
  text: string;
}

interface Sent {
  endpoint: Endpoint;
  body: Buffer;
  /** Appended to the path as it is: "?timeout=…" and the like. */
  query?: string;
  contentType?: string | undefined;
  /** Chunked transfer encoding instead of a Content-Length. */
  chunked?: boolean;
}

function post(sent: Sent): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = sent.contentType === undefined ? {} : { "content-type": sent.contentType };
    if (!sent.chunked) headers["content-length"] = String(sent.body.length);
    else headers["transfer-encoding"] = "chunked";
    const req = request(`${server.base}/${sent.endpoint}${sent.query ?? ""}`, { method: "POST", agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, contentType: res.headers["content-type"], text: Buffer.concat(chunks).toString("utf8") });
      });
      res.on("error", reject);
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer from /${sent.endpoint} within ${ANSWER_TIMEOUT_MS} ms`)), ANSWER_TIMEOUT_MS);
    req.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    if (sent.chunked) {
      req.write(sent.body);
      req.end();
    } else req.end(sent.body);
  });
}

// ---------------------------------------------------------------------------------------------------------
// The oracle: what the server must answer, decided without it.

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * How deep arrays and objects nest in the text of a JSON value (`[]` is 1). The text, not the value: the value
 * of a duplicate key that JSON.parse drops still nests in the body the server reads.
 */
function depthOf(json: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") max = Math.max(max, ++depth);
    else if (c === "]" || c === "}") depth--;
  }
  return max;
}

type Expected = { status: 413 } | { status: 400 } | { status: 200; value: unknown };

function expected(endpoint: Endpoint, body: Buffer): Expected {
  if (body.length > MAX_BYTES) return { status: 413 };
  if (body.length === 0) return { status: 400 };
  let value: unknown;
  let text: string;
  try {
    text = STRICT_UTF8.decode(body);
    value = JSON.parse(text);
  } catch {
    return { status: 400 }; // not UTF-8 (a byte-order mark included), not JSON, or too deep for JSON.parse itself
  }
  if (depthOf(text) > MAX_JSON_DEPTH) return { status: 400 };
  const readable = endpoint === "imagereview" ? parseImageReview(value).ok : parseAdmissionReview(value).ok;
  return readable ? { status: 200, value } : { status: 400 };
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function assertStringMap(v: unknown, what: string): void {
  assert.ok(isObj(v), `${what} is a map`);
  for (const [k, s] of Object.entries(v)) assert.equal(typeof s, "string", `${what}[${JSON.stringify(k)}] is a string`);
}

const PATCH_OPS = new Set(["add", "remove", "replace", "move", "copy", "test"]);
const JSON_POINTER = /^(?:\/(?:[^~/]|~[01])*)*$/;

/** The answer to an AdmissionReview the parser read: its version, the request's uid, a verdict, a valid patch. */
function checkAdmissionAnswer(endpoint: Endpoint, sent: unknown, got: unknown): Outcome {
  const request = (sent as { request: { uid: string } }).request;
  assert.ok(isObj(got), "the answer is an object");
  assert.deepEqual(Object.keys(got).sort(), ["apiVersion", "kind", "response"]);
  assert.equal(got.apiVersion, (sent as { apiVersion: string }).apiVersion);
  assert.ok(ADMISSION_API_VERSIONS.some((v) => v === got.apiVersion));
  assert.equal(got.kind, "AdmissionReview");
  const r = got.response;
  assert.ok(isObj(r), "response is an object");
  assert.equal(r.uid, request.uid, "the response names the request's uid");
  assert.equal(typeof r.allowed, "boolean");
  if (r.allowed === false) {
    assert.ok(isObj(r.status), "a denial has a status");
    assert.equal(r.status.code, 403);
    assert.ok(typeof r.status.message === "string" && r.status.message.length > 0, "a denial says why");
    assert.equal(r.patch, undefined, "a denial carries no patch");
  }
  if (r.warnings !== undefined) {
    assert.ok(Array.isArray(r.warnings));
    for (const w of r.warnings) assert.ok(typeof w === "string" && w.length <= 500 && !/[\u0000-\u001f\u007f]/.test(w), `warning ${JSON.stringify(w)}`);
  }
  if (r.auditAnnotations !== undefined) assertStringMap(r.auditAnnotations, "response.auditAnnotations");
  assert.equal(r.patchType === undefined, r.patch === undefined, "patch and patchType come together");
  if (r.patch !== undefined) {
    assert.equal(endpoint, "mutate", "only /mutate patches");
    assert.equal(r.patchType, "JSONPatch");
    assert.ok(typeof r.patch === "string" && /^[A-Za-z0-9+/]*={0,2}$/.test(r.patch) && r.patch.length % 4 === 0, "the patch is base64");
    const ops: unknown = JSON.parse(Buffer.from(r.patch, "base64").toString("utf8"));
    assert.ok(Array.isArray(ops) && ops.length > 0, "the patch is a list of operations");
    for (const op of ops) {
      assert.ok(isObj(op) && typeof op.op === "string" && PATCH_OPS.has(op.op), `patch operation ${JSON.stringify(op)}`);
      assert.ok(typeof op.path === "string" && JSON_POINTER.test(op.path), `patch path ${JSON.stringify(op.path)}`);
      if (op.op === "add" || op.op === "replace" || op.op === "test") assert.ok("value" in op, "the operation has a value");
    }
  }
  return r.allowed ? "allowed" : "denied";
}

/** The answer to an ImageReview the parser read: the spec as read, a status, and never an unreadable image allowed. */
function checkImageReviewAnswer(sent: unknown, got: unknown): Outcome {
  const parsed = parseImageReview(sent);
  assert.ok(parsed.ok);
  assert.ok(isObj(got), "the answer is an object");
  assert.equal(got.apiVersion, IMAGE_REVIEW_API_VERSION);
  assert.equal(got.kind, "ImageReview");
  assert.deepEqual(got.spec, parsed.review.spec, "the spec comes back as it was read");
  const status = got.status;
  assert.ok(isObj(status), "status is an object");
  assert.equal(typeof status.allowed, "boolean");
  if (!status.allowed) assert.ok(typeof status.reason === "string" && status.reason.length > 0, "a denial says why");
  if (status.auditAnnotations !== undefined) assertStringMap(status.auditAnnotations, "status.auditAnnotations");
  const unreadable = parsed.review.spec.containers.find((c) => !checkImageReference(c.image).ok);
  if (unreadable) assert.equal(status.allowed, false, `the unreadable image ${JSON.stringify(unreadable.image)} is denied`);
  return status.allowed ? "allowed" : "denied";
}

/**
 * A Pod created under `pods` (no subresource) whose container images cannot be read: /validate must deny it
 * (an image that is not a string is reviewed as "", an invalid reference).
 */
function unreadablePodImage(value: unknown): string | undefined {
  const req = (value as { request: Record<string, unknown> }).request;
  const resource = req.resource;
  const obj = req.object;
  if (req.operation !== "CREATE" || req.subResource !== undefined) return undefined;
  if (!isObj(resource) || (resource.group ?? "") !== "" || resource.resource !== "pods") return undefined;
  if (!isObj(obj) || obj.kind !== "Pod" || obj.apiVersion !== "v1" || !isObj(obj.spec)) return undefined;
  for (const list of ["containers", "initContainers", "ephemeralContainers"]) {
    const containers = obj.spec[list];
    if (!Array.isArray(containers)) continue;
    for (const c of containers) {
      const image = isObj(c) && typeof c.image === "string" ? c.image : "";
      if (!checkImageReference(image).ok) return image;
    }
  }
  return undefined;
}

/** A body for a failure message: its text when it is UTF-8, its bytes otherwise, cut short. */
function describe(body: Buffer): string {
  const text = body.toString("utf8");
  const shown = Buffer.from(text).equals(body) ? JSON.stringify(text) : `bytes ${body.toString("hex")}`;
  return shown.length > 2000 ? `${shown.slice(0, 2000)}… (${body.length} bytes)` : shown;
}

/** Sends one body and checks the answer against the oracle; returns what came of it. */
async function exchange(sent: Sent): Promise<Outcome> {
  const want = expected(sent.endpoint, sent.body);
  const answer = await post(sent);
  assert.ok(answer.status < 500, `/${sent.endpoint}${sent.query ?? ""} answered ${answer.status}: ${answer.text.slice(0, 500)}\nto: ${describe(sent.body)}`);
  assert.equal(answer.status, want.status, `/${sent.endpoint} answered ${answer.status}, expected ${want.status}: ${answer.text.slice(0, 500)}`);
  assert.match(answer.contentType ?? "", /^application\/json\b/);
  const got: unknown = JSON.parse(answer.text);
  if (want.status !== 200) {
    // A metav1.Status with a readable reason.
    assert.ok(isObj(got));
    assert.deepEqual([got.apiVersion, got.kind, got.status, got.code], ["v1", "Status", "Failure", want.status]);
    // Readable, if not always short: a refusal quotes the value it could not read, whole.
    assert.ok(typeof got.message === "string" && got.message.length > 0, `a reason: ${String(got.message).slice(0, 200)}`);
    return want.status === 413 ? "too-large" : "refused";
  }
  if (sent.endpoint === "imagereview") return checkImageReviewAnswer(want.value, got);
  const outcome = checkAdmissionAnswer(sent.endpoint, want.value, got);
  const image = sent.endpoint === "validate" ? unreadablePodImage(want.value) : undefined;
  if (image !== undefined) assert.equal(outcome, "denied", `a pod with the unreadable image ${JSON.stringify(image)} is denied`);
  return outcome;
}

function tally(): Record<Outcome, number> {
  return { allowed: 0, denied: 0, refused: 0, "too-large": 0 };
}

/**
 * Each outcome the property is meant to reach was reached, so that it did not pass vacuously. Only on a run of
 * some size: a replay with IMPRIMATUR_FUZZ_RUNS=1 checks its one input.
 */
function assertReached(t: TestContext, counts: Record<Outcome, number>, outcomes: readonly Outcome[]): void {
  t.diagnostic(`outcomes: ${JSON.stringify(counts)}`);
  if (fuzzRuns() < 100) return;
  for (const o of outcomes) assert.ok(counts[o] > 0, `some inputs were ${o}: ${JSON.stringify(counts)}`);
}

// ---------------------------------------------------------------------------------------------------------
// Base documents near the valid space.

const DIGEST = `sha256:${"a".repeat(64)}`;

function container(name: string, image: string, securityContext?: Record<string, unknown>) {
  return { name, image, ...(securityContext ? { securityContext } : {}) };
}

function review(request: Record<string, unknown>, apiVersion = "admission.k8s.io/v1") {
  return { apiVersion, kind: "AdmissionReview", request: { uid: "uid-1", userInfo: { username: "alice", groups: ["system:authenticated"] }, ...request } };
}

function deployment(images: string[]) {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "d", namespace: "default" },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "d" } },
      template: { metadata: { labels: { app: "d" } }, spec: { containers: images.map((image, i) => container(`c${i}`, image)) } },
    },
  };
}

const podUpdate = podReview({ images: ["registry.example.com/app:2.0"], operation: "UPDATE", uid: "uid-upd" });
(podUpdate.request as Record<string, unknown>).oldObject = podReview({ images: ["registry.example.com/app:1.0"] }).request.object;

const ADMISSION_BASES: Record<string, unknown> = {
  "pod allowed": podReview({ images: ["registry.example.com/app:1.0"], uid: "uid-pod" }),
  "pod denied (:latest)": podReview({ images: ["registry.example.com/app:1.0", "nginx"], initImages: ["busybox:latest"], uid: "uid-latest" }),
  "pod denied (privileged)": (() => {
    const r = podReview({ images: [`registry.example.com/app@${DIGEST}`], uid: "uid-priv" });
    (r.request.object.spec.containers[0] as Record<string, unknown>).securityContext = { privileged: true };
    return r;
  })(),
  "pod break-glass": podReview({
    images: ["nginx:latest"],
    annotations: { "break-glass.image-policy.k8s.io/reason": "prod down", "break-glass.image-policy.k8s.io/ticket": "INC-1" },
    dryRun: true,
    uid: "uid-bg",
  }),
  "pod update": podUpdate,
  "pod delete": review({
    operation: "DELETE",
    resource: { group: "", version: "v1", resource: "pods" },
    kind: { group: "", version: "v1", kind: "Pod" },
    namespace: "default",
    name: "p",
    object: null,
    oldObject: podReview({ images: ["nginx"] }).request.object,
  }),
  deployment: review({
    operation: "CREATE",
    resource: { group: "apps", version: "v1", resource: "deployments" },
    kind: { group: "apps", version: "v1", kind: "Deployment" },
    namespace: "default",
    name: "d",
    object: deployment(["registry.example.com/app:1.0", "nginx:latest"]),
  }),
  "cronjob (v1beta1 review)": review(
    {
      operation: "CREATE",
      resource: { group: "batch", version: "v1", resource: "cronjobs" },
      kind: { group: "batch", version: "v1", kind: "CronJob" },
      namespace: "jobs",
      object: {
        apiVersion: "batch/v1",
        kind: "CronJob",
        metadata: { name: "c", namespace: "jobs" },
        spec: { schedule: "* * * * *", jobTemplate: { spec: { template: { spec: { containers: [container("c", "registry.example.com/job:3")] } } } } },
      },
    },
    "admission.k8s.io/v1beta1",
  ),
  "ephemeral containers": review({
    operation: "UPDATE",
    resource: { group: "", version: "v1", resource: "pods" },
    subResource: "ephemeralcontainers",
    kind: { group: "", version: "v1", kind: "Pod" },
    namespace: "default",
    name: "p",
    object: {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "default" },
      spec: { containers: [container("c", "registry.example.com/app:1.0")], ephemeralContainers: [container("debug", "busybox")] },
    },
    oldObject: {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "default" },
      spec: { containers: [container("c", "registry.example.com/app:1.0")] },
    },
  }),
  "ephemeral containers (v1.20 kind)": review({
    operation: "UPDATE",
    resource: { group: "", version: "v1", resource: "pods" },
    subResource: "ephemeralcontainers",
    kind: { group: "", version: "v1", kind: "EphemeralContainers" },
    namespace: "default",
    name: "p",
    object: { kind: "EphemeralContainers", apiVersion: "v1", metadata: { name: "p" }, ephemeralContainers: [container("debug", "busybox:1.36")] },
    oldObject: { kind: "EphemeralContainers", apiVersion: "v1", metadata: { name: "p" }, ephemeralContainers: [] },
  }),
  namespace: review({
    operation: "CREATE",
    resource: { group: "", version: "v1", resource: "namespaces" },
    kind: { group: "", version: "v1", kind: "Namespace" },
    name: "team-a",
    object: { apiVersion: "v1", kind: "Namespace", metadata: { name: "team-a", labels: { "pod-security.kubernetes.io/enforce": "restricted" } } },
  }),
};

const IMAGE_BASES: Record<string, unknown> = {
  allowed: imageReview(["registry.example.com/app:1.0", `busybox@${DIGEST}`], "team-a"),
  denied: imageReview(["registry.example.com/app:1.0", "nginx:latest"]),
  "break-glass": imageReview(["nginx"], "default", { "break-glass.image-policy.k8s.io/reason": "r", "break-glass.image-policy.k8s.io/ticket": "T-1" }),
  "with metadata": { ...imageReview(["registry.example.com/app:1.0"]), metadata: { creationTimestamp: null } },
  "no containers": { apiVersion: IMAGE_REVIEW_API_VERSION, kind: "ImageReview", spec: {} },
};

/** The bases each verdict comes from (pinned by the first test): the others are allowed. */
const DENIED_BASES = new Set(["pod denied (:latest)", "pod denied (privileged)", "deployment", "ephemeral containers", "image denied"]);
const BASE_PAIRS = [
  ...Object.entries(ADMISSION_BASES).map(([name, doc]) => ({ name, endpoint: "validate" as Endpoint, text: JSON.stringify(doc) })),
  ...Object.entries(IMAGE_BASES).map(([name, doc]) => ({ name: `image ${name}`, endpoint: "imagereview" as Endpoint, text: JSON.stringify(doc) })),
].map((b) => ({ ...b, denied: DENIED_BASES.has(b.name) }));

// ---------------------------------------------------------------------------------------------------------
// Arbitraries.

/** A value that nests `depth` levels, alternating arrays and objects as `shape` says. */
function nested(depth: number, shape: readonly boolean[], leaf: unknown = 1): unknown {
  let v = leaf;
  for (let i = depth - 1; i >= 0; i--) v = shape[i % Math.max(1, shape.length)] ? [v] : { k: v };
  return v;
}

/** Any JSON value, with the values readers trip on overrepresented. */
const garbage: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom<unknown>(
      null,
      "",
      0,
      -1,
      1.5,
      1e308,
      true,
      false,
      [],
      {},
      [null],
      { "": null },
      "\ud800",
      "\udfff\ud800",
      "null",
      "CREATE",
      "Pod",
      "v1",
      "__proto__",
      { __proto__: null, toString: 1 },
      { length: 3 },
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 6000 }).map((n) => "x".repeat(n)) },
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 5, max: 80 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 4 })).map(([d, s]) => nested(d, s)) },
);

/** Image references: valid, near-valid (a character inserted), and arbitrary text. */
const VALID_IMAGES = [
  "registry.example.com/app:1.0",
  "nginx",
  "nginx:latest",
  "nginx:1.25",
  `busybox@${DIGEST}`,
  `docker.io/library/nginx:1@${DIGEST}`,
  "localhost:5000/x:y",
  "[::1]:5000/x:1",
];
const imageArb: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    ...VALID_IMAGES,
    "UPPER/case:1",
    "",
    " ",
    "a".repeat(64),
    `x:${"t".repeat(129)}`,
    "nginx:latest\n",
    "nginx@sha256:abc",
    "é/ü:1",
    "constructor",
  ),
  fc
    .tuple(fc.constantFrom(...VALID_IMAGES), fc.nat(), fc.constantFrom(..."A :@/._-\u0000\u200b[]%é"))
    .map(([s, at, c]) => s.slice(0, at % (s.length + 1)) + c + s.slice(at % (s.length + 1))),
  fc.string({ unit: fc.constantFrom(..."abz09.-_/:@[]"), maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 30 }),
  fc.integer({ min: 200, max: 600 }).map((n) => `registry.example.com/${"a".repeat(n)}:1`),
);

const annotationsArb: fc.Arbitrary<unknown> = fc.dictionary(
  fc.oneof(
    fc.constantFrom(
      "break-glass.image-policy.k8s.io/reason",
      "break-glass.image-policy.k8s.io/ticket",
      "x.image-policy.k8s.io/hint",
      ".image-policy.k8s.io/x",
      "__proto__",
      "constructor",
    ),
    fc.string({ maxLength: 20 }),
  ),
  fc.oneof(fc.string({ maxLength: 20 }), garbage),
  { maxKeys: 4 },
);

const securityContextArb: fc.Arbitrary<unknown> = fc.record(
  {
    privileged: fc.oneof(fc.boolean(), garbage),
    runAsUser: fc.oneof(fc.integer(), garbage),
    allowPrivilegeEscalation: fc.oneof(fc.boolean(), garbage),
    capabilities: fc.oneof(fc.record({ add: fc.array(fc.constantFrom("SYS_ADMIN", "NET_RAW", "ALL", "CHOWN", "")) }, { requiredKeys: [] }), garbage),
    seccompProfile: fc.oneof(fc.record({ type: fc.constantFrom("RuntimeDefault", "Unconfined", "Localhost") }), garbage),
  },
  { requiredKeys: [] },
);

const containerArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ name: fc.string({ maxLength: 8 }), image: imageArb, securityContext: securityContextArb }, { requiredKeys: ["image"] }) },
  { weight: 1, arbitrary: garbage },
);

type Path = Array<string | number>;

/** Mutations of a document: generic ones at a position chosen among its paths, and targeted ones at a named path. */
type Mutation =
  | { op: "delete"; at: number }
  | { op: "replace"; at: number; value: unknown }
  | { op: "add"; at: number; key: string; value: unknown }
  | { op: "set"; path: Path; value: unknown };

const keyArb = fc.oneof(
  fc.constantFrom(
    "__proto__",
    "constructor",
    "uid",
    "image",
    "apiVersion",
    "kind",
    "",
    "spec",
    "metadata",
    "annotations",
    "securityContext",
    "containers",
    "template",
  ),
  fc.string({ maxLength: 12 }),
);

function genericMutation(): fc.Arbitrary<Mutation> {
  return fc.oneof(
    fc.record({ op: fc.constant("delete" as const), at: fc.nat() }),
    fc.record({ op: fc.constant("replace" as const), at: fc.nat(), value: garbage }),
    fc.record({ op: fc.constant("add" as const), at: fc.nat(), key: keyArb, value: garbage }),
  );
}

function targeted(targets: ReadonlyArray<[Path, fc.Arbitrary<unknown>]>): fc.Arbitrary<Mutation> {
  return fc.oneof(...targets.map(([path, arb]) => arb.map((value): Mutation => ({ op: "set", path, value }))));
}

/** Every path in a value, parents before children. */
function pathsOf(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push([...prefix, i]);
      pathsOf(v, [...prefix, i], out);
    });
  } else if (isObj(value)) {
    for (const [k, v] of Object.entries(value)) {
      out.push([...prefix, k]);
      pathsOf(v, [...prefix, k], out);
    }
  }
  return out;
}

/**
 * An own, enumerable property even for "__proto__", as JSON.parse makes it. A copy of the value: fast-check
 * hands out the same values again (constants, shrinking), and a later mutation must not change them.
 */
function put(target: Record<string | number, unknown> | unknown[], key: string | number, given: unknown): void {
  const value = structuredClone(given);
  if (Array.isArray(target) && typeof key === "number") target[key] = value;
  else Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function at(doc: unknown, path: Path): unknown {
  let v = doc;
  for (const k of path) v = (v as Record<string | number, unknown>)[k];
  return v;
}

/** The document with a mutation applied; the root stays an object. */
function mutate(doc: Record<string, unknown>, m: Mutation): void {
  if (m.op === "set") {
    let parent: Record<string | number, unknown> | unknown[] = doc;
    for (const [i, k] of m.path.entries()) {
      if (i === m.path.length - 1) break;
      let next = Object.hasOwn(parent, k) ? (parent as Record<string | number, unknown>)[k] : undefined;
      if (typeof next !== "object" || next === null) {
        next = typeof m.path[i + 1] === "number" ? [] : {};
        put(parent, k, next);
      }
      parent = next as Record<string, unknown>;
    }
    put(parent, m.path[m.path.length - 1]!, m.value);
    return;
  }
  const paths = pathsOf(doc);
  if (m.op === "add") {
    const containers = [[], ...paths].filter((p) => typeof at(doc, p) === "object" && at(doc, p) !== null);
    const target = at(doc, containers[m.at % containers.length]!) as Record<string, unknown> | unknown[];
    if (Array.isArray(target)) target.push(structuredClone(m.value));
    else put(target, m.key, m.value);
    return;
  }
  if (paths.length === 0) return;
  const path = paths[m.at % paths.length]!;
  const parent = at(doc, path.slice(0, -1)) as Record<string | number, unknown> | unknown[];
  const key = path[path.length - 1]!;
  if (m.op === "replace") put(parent, key, m.value);
  else if (Array.isArray(parent)) parent.splice(key as number, 1);
  else delete parent[key];
}

function applied(base: unknown, mutations: readonly Mutation[]): Record<string, unknown> {
  const doc = structuredClone(base) as Record<string, unknown>;
  for (const m of mutations) mutate(doc, m);
  return doc;
}

const ADMISSION_TARGETS: ReadonlyArray<[Path, fc.Arbitrary<unknown>]> = [
  [["apiVersion"], fc.oneof(fc.constantFrom(...ADMISSION_API_VERSIONS, "admission.k8s.io/v2", "admission.k8s.io/V1", "v1", IMAGE_REVIEW_API_VERSION), garbage)],
  [["kind"], fc.oneof(fc.constantFrom("AdmissionReview", "admissionreview", "ImageReview", "Pod"), garbage)],
  [["request"], garbage],
  [["request", "uid"], fc.oneof(fc.string({ unit: "grapheme", maxLength: 40 }), fc.integer(), garbage)],
  [["request", "operation"], fc.oneof(fc.constantFrom(...ADMISSION_OPERATIONS, "create", "PATCH", "APPLY"), garbage)],
  [["request", "object"], fc.oneof(fc.constant(null), garbage)],
  [["request", "oldObject"], garbage],
  [["request", "dryRun"], garbage],
  [["request", "userInfo"], fc.oneof(garbage, fc.record({ username: garbage, uid: garbage, groups: garbage, extra: garbage }, { requiredKeys: [] }))],
  [["request", "userInfo", "username"], fc.oneof(fc.string({ unit: "grapheme", maxLength: 30 }), garbage)],
  [["request", "namespace"], fc.oneof(fc.constantFrom("kube-system", "", "default"), garbage)],
  [["request", "name"], garbage],
  [["request", "subResource"], fc.oneof(fc.constantFrom("ephemeralcontainers", "status", "exec", ""), garbage)],
  [
    ["request", "resource"],
    fc.oneof(
      fc.record({
        group: fc.constantFrom("", "apps", "batch"),
        version: fc.constant("v1"),
        resource: fc.constantFrom("pods", "deployments", "namespaces", "cronjobs", "configmaps"),
      }),
      garbage,
    ),
  ],
  [
    ["request", "kind"],
    fc.oneof(
      fc.record({
        group: fc.constantFrom("", "apps"),
        version: fc.constant("v1"),
        kind: fc.constantFrom("Pod", "Deployment", "Namespace", "EphemeralContainers"),
      }),
      garbage,
    ),
  ],
  [["request", "object", "apiVersion"], fc.oneof(fc.constantFrom("v1", "apps/v1", "batch/v1", "/v1", ""), garbage)],
  [["request", "object", "kind"], fc.oneof(fc.constantFrom("Pod", "Deployment", "Namespace", "EphemeralContainers", "CronJob"), garbage)],
  [["request", "object", "metadata"], garbage],
  [["request", "object", "metadata", "annotations"], fc.oneof(annotationsArb, garbage)],
  [["request", "object", "metadata", "labels"], fc.oneof(annotationsArb, garbage)],
  [["request", "object", "metadata", "namespace"], garbage],
  [["request", "object", "spec"], garbage],
  [["request", "object", "spec", "containers"], fc.oneof(fc.array(containerArb, { maxLength: 4 }), garbage)],
  [["request", "object", "spec", "containers", 0, "image"], fc.oneof({ weight: 3, arbitrary: imageArb }, { weight: 1, arbitrary: garbage })],
  [["request", "object", "spec", "containers", 0, "securityContext"], securityContextArb],
  [["request", "object", "spec", "initContainers"], fc.array(containerArb, { maxLength: 3 })],
  [["request", "object", "spec", "ephemeralContainers"], fc.array(containerArb, { maxLength: 3 })],
  [["request", "object", "spec", "securityContext"], fc.oneof(securityContextArb, garbage)],
  [["request", "object", "spec", "hostNetwork"], fc.oneof(fc.boolean(), garbage)],
  [
    ["request", "object", "spec", "volumes"],
    fc.oneof(fc.array(fc.record({ name: fc.constant("v"), image: fc.record({ reference: imageArb }) }), { maxLength: 2 }), garbage),
  ],
  [["request", "object", "spec", "template", "spec", "containers", 0, "image"], imageArb],
  [["request", "object", "spec", "template"], garbage],
  [["request", "object", "ephemeralContainers"], fc.oneof(fc.array(containerArb, { maxLength: 3 }), garbage)],
  [["request", "oldObject", "spec", "containers"], fc.oneof(fc.array(containerArb, { maxLength: 3 }), garbage)],
];

const IMAGE_TARGETS: ReadonlyArray<[Path, fc.Arbitrary<unknown>]> = [
  [["apiVersion"], fc.oneof(fc.constantFrom(IMAGE_REVIEW_API_VERSION, "imagepolicy.k8s.io/v1", "imagepolicy.k8s.io/v1beta1", "admission.k8s.io/v1"), garbage)],
  [["kind"], fc.oneof(fc.constantFrom("ImageReview", "imagereview", "AdmissionReview"), garbage)],
  [["metadata"], garbage],
  [["status"], fc.oneof(fc.record({ allowed: fc.oneof(fc.boolean(), garbage) }), garbage)],
  [["spec"], garbage],
  [["spec", "containers"], fc.oneof({ weight: 3, arbitrary: fc.array(fc.record({ image: imageArb }), { maxLength: 4 }) }, { weight: 1, arbitrary: garbage })],
  [["spec", "containers", 0], fc.oneof(fc.record({ image: fc.oneof(imageArb, garbage) }, { requiredKeys: [] }), garbage)],
  [["spec", "containers", 0, "image"], fc.oneof({ weight: 3, arbitrary: imageArb }, { weight: 1, arbitrary: garbage })],
  [["spec", "containers", 1, "image"], imageArb],
  [["spec", "annotations"], fc.oneof(annotationsArb, garbage)],
  [["spec", "annotations", "break-glass.image-policy.k8s.io/ticket"], fc.oneof(fc.string({ maxLength: 10 }), garbage)],
  [["spec", "namespace"], fc.oneof(fc.constantFrom("kube-system", "", "team-a", "Not A Namespace"), garbage)],
];

const admissionMutations = fc.array(fc.oneof({ weight: 1, arbitrary: genericMutation() }, { weight: 2, arbitrary: targeted(ADMISSION_TARGETS) }), {
  maxLength: 4,
});
const imageMutations = fc.array(fc.oneof({ weight: 1, arbitrary: genericMutation() }, { weight: 2, arbitrary: targeted(IMAGE_TARGETS) }), { maxLength: 4 });

/** Query strings, `?timeout=` above all (kube-apiserver's, percent-decoded by the server), garbage among them. */
const queryArb: fc.Arbitrary<string | undefined> = fc.option(
  fc.oneof(
    fc.constantFrom(
      "?timeout=10s",
      "?timeout=0",
      "?timeout=-5s",
      "?timeout=1.5h30m",
      `?timeout=${"9".repeat(400)}h`,
      "?timeout=",
      "?x=1&timeout=3s",
      "?timeout=10%73",
    ),
    fc.string({ unit: fc.constantFrom(..."0123456789.smhun%-+&=?aZ"), maxLength: 20 }).map((s) => `?timeout=${s}`),
  ),
  { freq: 2 },
);
const contentTypeArb = fc.constantFrom(
  undefined,
  "application/json",
  "application/json; charset=utf-8",
  "text/plain",
  "application/yaml",
  "application/x-www-form-urlencoded",
);

/** Bytes inserted into valid text to make it invalid UTF-8: stray continuation, truncated sequences, an encoded surrogate, overlong. */
const BAD_UTF8 = [[0xff], [0x80], [0xc3], [0xc3, 0x28], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf4, 0x90, 0x80, 0x80]];

/** The name of a base document: a denied one as often as an allowed one. */
function baseName(bases: Record<string, unknown>, prefix: string): fc.Arbitrary<string> {
  const names = Object.keys(bases);
  const denied = names.filter((n) => DENIED_BASES.has(prefix + n));
  return fc.oneof(fc.constantFrom(...names.filter((n) => !denied.includes(n))), fc.constantFrom(...denied));
}

/**
 * A base document's text with the endpoint it is for (most of the time; else another one): a denied one as often
 * as an allowed one, so that the bodies derived from it reach both verdicts.
 */
const baseArb: fc.Arbitrary<{ endpoint: Endpoint; text: string }> = fc
  .tuple(
    fc.oneof(fc.constantFrom(...BASE_PAIRS.filter((b) => !b.denied)), fc.constantFrom(...BASE_PAIRS.filter((b) => b.denied))),
    fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom(...ENDPOINTS) }),
  )
  .map(([b, other]) => ({ endpoint: other ?? b.endpoint, text: b.text }));

/** A base text with a string padded so the whole body is `MAX_BYTES + delta` bytes. */
function paddedTo(text: string, delta: number, pad: string): Buffer {
  const prefix = text.slice(0, -1) + ',"pad":"';
  const room = MAX_BYTES + delta - Buffer.byteLength(prefix) - Buffer.byteLength('"}');
  const unit = Buffer.byteLength(pad);
  const filler = pad.repeat(Math.max(0, Math.floor(room / unit))) + "x".repeat(Math.max(0, room % unit));
  return Buffer.from(prefix + filler + '"}');
}

type Posted = { endpoint: Endpoint; body: Buffer };

/** A body made from a base document, for that document's endpoint. */
function derived<T>(arb: fc.Arbitrary<T>, make: (text: string, extra: T) => Buffer): fc.Arbitrary<Posted> {
  return fc.tuple(baseArb, arb).map(([b, extra]) => ({ endpoint: b.endpoint, body: make(b.text, extra) }));
}

/** A body made from nothing valid, for any endpoint. */
function anywhere(arb: fc.Arbitrary<Buffer>): fc.Arbitrary<Posted> {
  return fc.tuple(fc.constantFrom(...ENDPOINTS), arb).map(([endpoint, body]) => ({ endpoint, body }));
}

/** Bodies of every kind, mostly near the valid space. */
const bodyArb: fc.Arbitrary<Posted> = fc.oneof(
  // Random bytes and random text.
  anywhere(fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b))),
  anywhere(fc.string({ unit: "grapheme", maxLength: 200 }).map((s) => Buffer.from(s))),
  // JSON of every type at the top level.
  anywhere(fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v) ?? "null"))),
  // Valid documents as they are, and truncated.
  { weight: 3, arbitrary: derived(fc.constant(null), (t) => Buffer.from(t)) },
  derived(fc.nat(), (t, n) => Buffer.from(t.slice(0, n % (t.length + 1)))),
  // Invalid UTF-8 inside a valid document; a byte-order mark; whitespace and trailing text.
  derived(fc.tuple(fc.nat(), fc.constantFrom(...BAD_UTF8)), (t, [n, bad]) => {
    const i = n % (t.length + 1);
    return Buffer.concat([Buffer.from(t.slice(0, i)), Buffer.from(bad), Buffer.from(t.slice(i))]);
  }),
  derived(fc.constant(null), (t) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(t)])),
  derived(fc.tuple(fc.constantFrom(" ", "\n\t", "\r\n"), fc.constantFrom("", "", " ", "x", "}", ",{}", "\u0000")), (t, [ws, tail]) =>
    Buffer.from(ws + t + ws + tail),
  ),
  // Nesting around the depth limit, and far beyond it, at the top level and inside a document.
  anywhere(
    fc
      .tuple(
        fc.oneof(fc.integer({ min: MAX_JSON_DEPTH - 3, max: MAX_JSON_DEPTH + 3 }), fc.integer({ min: 1000, max: 20_000 })),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 3 }),
        fc.boolean(),
      )
      .map(([depth, shape, closed]) => {
        const open = Array.from({ length: depth }, (_, i) => (shape[i % shape.length] ? "[" : '{"k":'));
        const close = closed
          ? open
              .map((o) => (o === "[" ? "]" : "}"))
              .reverse()
              .join("")
          : "";
        return Buffer.from(open.join("") + "1" + close);
      }),
  ),
  derived(
    fc.tuple(fc.integer({ min: MAX_JSON_DEPTH - 6, max: MAX_JSON_DEPTH + 2 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 3 })),
    (t, [depth, shape]) => Buffer.from(`${t.slice(0, -1)},"deep":${JSON.stringify(nested(depth, shape))}}`),
  ),
  // Sizes near the limit (an ASCII or a multi-byte padding, or escapes), and well beyond it.
  derived(fc.tuple(fc.integer({ min: -80, max: 80 }), fc.constantFrom("x", "é", "\u{1f600}", '\\"')), (t, [d, pad]) => paddedTo(t, d, pad)),
  { weight: 2, arbitrary: derived(fc.integer({ min: 1, max: 2 * MAX_BYTES }), (t, d) => paddedTo(t, d, "y")) },
  // Duplicate keys: JSON.parse keeps the last, and so must the answer (the uid above all). The duplicate goes
  // before the key's first occurrence (the original wins) or at the end of the top-level object (it wins there).
  derived(
    fc.tuple(fc.constantFrom("uid", "request", "apiVersion", "kind", "spec", "image", "operation", "object", "containers"), garbage, fc.boolean()),
    (t, [key, value, before]) => {
      const dup = `"${key}":${JSON.stringify(value) ?? "null"}`;
      const i = t.indexOf(`"${key}":`);
      if (before && i >= 0) return Buffer.from(`${t.slice(0, i)}${dup},${t.slice(i)}`);
      return Buffer.from(`${t.slice(0, -1)},${dup}}`);
    },
  ),
);

// ---------------------------------------------------------------------------------------------------------
// The properties.

test("the base documents answer as their names say, on /validate and /imagereview (what the properties start from)", async () => {
  for (const b of BASE_PAIRS) {
    assert.equal(await exchange({ endpoint: b.endpoint, body: Buffer.from(b.text), contentType: "application/json" }), b.denied ? "denied" : "allowed", b.name);
  }
});

// Found by (a): `?timeout=%` (a percent sign that escapes nothing) made decodeURIComponent throw a URIError,
// which no handler caught: a 500 for any body. A timeout that cannot be decoded is no timeout, as one that
// does not parse is: the server's default applies and the body is answered.
test("regression: a malformed percent-escape in ?timeout= is ignored, not a 500", async () => {
  const doc = podReview({ images: ["registry.example.com/app:1.0"], uid: "u-timeout" });
  for (const query of ["?timeout=%", "?timeout=%E0%A4%A", "?timeout=10%s", "?timeout=%ZZs"]) {
    for (const endpoint of ENDPOINTS) {
      const body = Buffer.from(JSON.stringify(endpoint === "imagereview" ? imageReview(["nginx:1.25"]) : doc));
      assert.equal(await exchange({ endpoint, body, query, contentType: "application/json" }), "allowed", `${endpoint}${query}`);
    }
  }
});

// Found by (b): the parser read only the request's uid, operation and objects, and the engine took the rest
// for the strings and objects AdmissionRequest declares. `resource.resource: {"toString": 1}` on a Pod (the
// denial names the resource in a template string) or such a `subResource` threw a TypeError: a 500. A field
// the engine reads that is not of its type makes the request unreadable: a 400 that names it.
test("regression: request fields of the wrong type are refused by name, not a 500", async () => {
  const cases: Array<[Path, unknown, RegExp]> = [
    [["request", "resource", "resource"], { toString: 1 }, /request\.resource\.resource must be a string/],
    [["request", "subResource"], { toString: 1 }, /request\.subResource must be a string/],
    [["request", "namespace"], 7, /request\.namespace must be a string/],
    [["request", "kind"], "Pod", /request\.kind must be an object/],
    [["request", "userInfo", "username"], ["alice"], /request\.userInfo\.username must be a string/],
    [["request", "userInfo", "groups"], "system:masters", /request\.userInfo\.groups must be a list of strings/],
    [["request", "dryRun"], "false", /request\.dryRun must be true or false/],
  ];
  for (const [path, value, message] of cases) {
    for (const endpoint of ["validate", "mutate"] as const) {
      const doc = applied(ADMISSION_BASES["pod denied (:latest)"], [{ op: "set", path, value }]);
      const answer = await post({ endpoint, body: Buffer.from(JSON.stringify(doc)), contentType: "application/json" });
      assert.equal(answer.status, 400, `${path.join(".")} = ${JSON.stringify(value)} on /${endpoint}: ${answer.text}`);
      assert.match(JSON.parse(answer.text).message, message);
    }
  }
  // Absent and null are the same, as Kubernetes decodes them.
  const nulls = applied(ADMISSION_BASES["pod allowed"], [
    { op: "set", path: ["request", "subResource"], value: null },
    { op: "set", path: ["request", "dryRun"], value: null },
    { op: "set", path: ["request", "userInfo", "groups"], value: null },
  ]);
  assert.equal(await exchange({ endpoint: "validate", body: Buffer.from(JSON.stringify(nulls)) }), "allowed");
});

test("(a) arbitrary bodies, query strings, content types and framings: never a 5xx, never a hang; a 4xx with a reason or a well-formed answer", async (t) => {
  const counts = tally();
  await checkProperty(
    fc.asyncProperty(bodyArb, queryArb, contentTypeArb, fc.boolean(), async ({ endpoint, body }, query, contentType, chunked) => {
      counts[await exchange({ endpoint, body, query, contentType, chunked })]++;
    }),
    { file: FILE },
  );
  assertReached(t, counts, ["allowed", "denied", "refused", "too-large"]);
});

test("(b) mutated AdmissionReviews: readable ones answered with their uid, unreadable ones refused and never allowed, patches valid", async (t) => {
  const counts = tally();
  await checkProperty(
    fc.asyncProperty(
      fc.constantFrom<Endpoint>("validate", "mutate"),
      baseName(ADMISSION_BASES, ""),
      admissionMutations,
      fc.boolean(),
      async (endpoint, base, mutations, chunked) => {
        const doc = applied(ADMISSION_BASES[base], mutations);
        counts[await exchange({ endpoint, body: Buffer.from(JSON.stringify(doc)), chunked, contentType: "application/json" })]++;
      },
    ),
    { file: FILE },
  );
  assertReached(t, counts, ["allowed", "denied", "refused"]);
});

test("(c) mutated ImageReviews: unreadable reviews refused, unreadable images denied, the status always well-formed", async (t) => {
  const counts = tally();
  await checkProperty(
    fc.asyncProperty(baseName(IMAGE_BASES, "image "), imageMutations, async (base, mutations) => {
      const doc = applied(IMAGE_BASES[base], mutations);
      counts[await exchange({ endpoint: "imagereview", body: Buffer.from(JSON.stringify(doc)), contentType: "application/json" })]++;
    }),
    { file: FILE },
  );
  assertReached(t, counts, ["allowed", "denied", "refused"]);
});

test("(d) after the runs the server still answers valid requests correctly, with any timeout", async () => {
  const send = (endpoint: Endpoint, doc: unknown, query?: string) =>
    post({ endpoint, body: Buffer.from(JSON.stringify(doc)), query, contentType: "application/json" });
  for (const query of [undefined, "?timeout=10s"]) {
    const allowed = await send("validate", podReview({ images: ["registry.example.com/app:1.0"], uid: "after-1" }), query);
    assert.equal(allowed.status, 200, allowed.text);
    assert.deepEqual(JSON.parse(allowed.text).response, {
      uid: "after-1",
      allowed: true,
      auditAnnotations: JSON.parse(allowed.text).response.auditAnnotations,
    });
    const denied = JSON.parse((await send("validate", podReview({ images: ["nginx"], uid: "after-2" }), query)).text).response;
    assert.deepEqual([denied.uid, denied.allowed, denied.status.code], ["after-2", false, 403]);
    assert.match(denied.status.message, /image "nginx" \(spec.containers\[0\].image\) denied by policy pinned-versions/);
    const mutated = JSON.parse((await send("mutate", podReview({ images: ["nginx"], uid: "after-3" }), query)).text).response;
    assert.deepEqual([mutated.uid, mutated.allowed], ["after-3", true]);
    const images = JSON.parse((await send("imagereview", imageReview(["nginx:latest"]), query)).text);
    assert.equal(images.status.allowed, false);
    assert.match(images.status.reason, /image "nginx:latest" denied by policy pinned-versions/);
    assert.equal(JSON.parse((await send("imagereview", imageReview(["nginx:1.25"]), query)).text).status.allowed, true);
  }
  const health = await new Promise<number>((resolve, reject) => {
    request(`${server.base}/healthz`, { agent }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on("error", reject)
      .end();
  });
  assert.equal(health, 200);
});
