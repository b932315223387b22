// The HTTPS server against malformed, oversized and valid requests: clear 4xx answers, and it keeps serving.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";
import { join } from "node:path";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { EMBEDDED_POLICIES } from "../../src/cli/args.ts";
import { declaredLength, HttpError, MAX_JSON_DEPTH, nestsDeeperThan, readJsonBody } from "../../src/server/http-body.ts";
import { getText, postJson } from "../support/https-client.ts";
import { startTestApp, type TestApp } from "../support/in-process-app.ts";
import { imageReview, podReview } from "../support/admission.ts";

let server: TestApp;
let dir: string;
let base: string;
let ca: string;

before(async () => {
  server = await startTestApp({ policies: EMBEDDED_POLICIES, config: { ...DEFAULT_SERVER_CONFIG, maxRequestBytes: 64 * 1024 } });
  ({ base, ca, stateDir: dir } = server);
});

after(async () => {
  await server?.close();
});

test("health, readiness and metrics", async () => {
  assert.equal((await getText(`${base}/healthz`, ca)).status, 200);
  assert.equal((await getText(`${base}/readyz`, ca)).status, 200);
  const metrics = await getText(`${base}/metrics`, ca);
  assert.match(metrics.text, /imprimatur_decisions_total/);
  assert.equal((await getText(`${base}/nowhere`, ca)).status, 404);
  assert.equal((await getText(`${base}/validate`, ca)).status, 405);
});

test("an allowed pod is admitted with the uid echoed", async () => {
  const review = podReview({ images: ["registry.example.com/app:1.0"], uid: "u-1" });
  const res = await postJson(`${base}/validate`, ca, review);
  assert.equal(res.status, 200);
  assert.deepEqual(
    [res.body.apiVersion, res.body.kind, res.body.response.uid, res.body.response.allowed],
    ["admission.k8s.io/v1", "AdmissionReview", "u-1", true],
  );
});

test("a denied pod gets 403 with every violation and its field path", async () => {
  const res = await postJson(`${base}/validate`, ca, podReview({ images: ["registry.example.com/app:1.0", "nginx"], initImages: ["busybox:latest"] }));
  const r = res.body.response;
  assert.equal(r.allowed, false);
  assert.equal(r.status.code, 403);
  assert.match(r.status.message, /image "nginx" \(spec.containers\[1\].image\) denied by policy pinned-versions rules\[1\]: pin a version/);
  assert.match(r.status.message, /image "busybox:latest" \(spec.initContainers\[0\].image\)/);
  assert.equal(r.auditAnnotations.decision, "denied");
});

test("ImageReview: wire format in and out, reason names policy and rule", async () => {
  const res = await postJson(`${base}/imagereview`, ca, imageReview(["nginx:latest", "nginx:1.25"], "team-a"));
  assert.equal(res.status, 200);
  assert.equal(res.body.apiVersion, "imagepolicy.k8s.io/v1alpha1");
  assert.equal(res.body.kind, "ImageReview");
  assert.equal(res.body.status.allowed, false);
  assert.equal(
    res.body.status.reason,
    'image "nginx:latest" denied by policy pinned-versions rules[1]: pin a version: the tag :latest (explicit or implied) can point at a different image tomorrow',
  );
  const ok = await postJson(`${base}/imagereview`, ca, imageReview(["nginx:1.25"]));
  assert.deepEqual(ok.body.status.allowed, true);
});

test("invalid image references are denials with the grammar's reason", async () => {
  const res = await postJson(`${base}/imagereview`, ca, imageReview(["UPPER/case:1"]));
  assert.equal(res.body.status.allowed, false);
  assert.match(res.body.status.reason, /UPPER\/case:1/);
});

const malformed: Array<[string, { raw?: string | Buffer; payload?: unknown; path?: string }, number, RegExp]> = [
  ["bad JSON", { raw: "{not json" }, 400, /not valid JSON/],
  ["empty body", { raw: "" }, 400, /empty/],
  ["a JSON array", { payload: [1, 2] }, 400, /must be a JSON object/],
  ["wrong apiVersion", { payload: { ...podReview({ images: ["a:1"] }), apiVersion: "admission.k8s.io/v2" } }, 400, /apiVersion must be one of/],
  ["wrong kind", { payload: { ...podReview({ images: ["a:1"] }), kind: "Pod" } }, 400, /kind must be "AdmissionReview"/],
  [
    "missing uid",
    { payload: { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { operation: "CREATE" } } },
    400,
    /request\.uid must be a non-empty string/,
  ],
  [
    "missing operation",
    { payload: { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid: "u" } } },
    400,
    /request\.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got null/,
  ],
  [
    "unknown operation",
    { payload: { ...podReview({ images: ["a:1"], operation: "PATCH" }) } },
    400,
    /request\.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got "PATCH"/,
  ],
  [
    "/mutate with an unknown operation",
    { path: "/mutate", payload: { ...podReview({ images: ["a:1"], operation: "APPLY" }) } },
    400,
    /request\.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got "APPLY"/,
  ],
  [
    "ImageReview with wrong kind",
    { path: "/imagereview", payload: { apiVersion: "imagepolicy.k8s.io/v1alpha1", kind: "TokenReview", spec: {} } },
    400,
    /kind must be "ImageReview"/,
  ],
  [
    "ImageReview with bad containers",
    { path: "/imagereview", payload: { apiVersion: "imagepolicy.k8s.io/v1alpha1", kind: "ImageReview", spec: { containers: [{ image: 7 }] } } },
    400,
    /spec\.containers\[0\]\.image must be a string/,
  ],
  ["oversized body", { raw: JSON.stringify({ pad: "x".repeat(70 * 1024) }) }, 413, /limit is 65536|exceeds the limit/],
  ["/mutate with bad JSON", { path: "/mutate", raw: "{not json" }, 400, /not valid JSON/],
  [
    "/mutate with a wrong kind",
    { path: "/mutate", payload: { ...podReview({ images: ["a:1"] }), kind: "ImageReview" } },
    400,
    /kind must be "AdmissionReview"/,
  ],
  ["deeply nested body", { raw: "[".repeat(20_000) + "]".repeat(20_000) }, 400, /nests JSON objects and arrays more than 64 levels deep/],
  [
    "a body that is not UTF-8",
    { raw: Buffer.concat([Buffer.from('{"apiVersion":"admission.k8s.io/v1","kind":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]) },
    400,
    /not valid UTF-8/,
  ],
];

for (const [name, input, status, message] of malformed) {
  test(`malformed request: ${name} → ${status} with a clear message, and the server keeps serving`, async () => {
    const res = await postJson(`${base}${input.path ?? "/validate"}`, ca, input.payload, input.raw !== undefined ? { raw: input.raw } : {});
    assert.equal(res.status, status, res.text);
    assert.equal(res.body.kind, "Status");
    assert.match(res.body.message, message);
    const after = await postJson(`${base}/validate`, ca, podReview({ images: ["registry.example.com/app:1.0"] }));
    assert.equal(after.body.response.allowed, true);
  });
}

test("break-glass without a Kubernetes API to ask who may use it is refused, and the attempt is audited; dry runs are not", async () => {
  const annotations = { "break-glass.image-policy.k8s.io/reason": "prod down", "break-glass.image-policy.k8s.io/ticket": "INC-7" };
  const dry = await postJson(`${base}/validate`, ca, podReview({ images: ["nginx"], annotations, dryRun: true, uid: "dry" }));
  assert.equal(dry.body.response.allowed, false);
  const res = await postJson(`${base}/validate`, ca, podReview({ images: ["nginx"], annotations, uid: "bg-1" }));
  assert.equal(res.body.response.allowed, false);
  assert.match(
    res.body.response.status.message,
    /break-glass was requested by "alice", who may not use it on this policy: the server has no Kubernetes API to ask/,
  );
  const lines = (await readFile(join(dir, "audit.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => [l.uid, l.event]),
    [["bg-1", "break-glass-refused"]],
  );
  assert.deepEqual([lines[0].ticket, lines[0].reason, lines[0].user], ["INC-7", "prod down", "alice"]);
  assert.deepEqual(
    lines[0].refusals.map((v: { rule: string }) => v.rule),
    ["breakGlass"],
  );
  assert.equal(lines[0].denials[0].image, "nginx");
});

test("break-glass over /imagereview is refused by default: an ImageReview names no user to ask about", async () => {
  const annotations = { "break-glass.image-policy.k8s.io/reason": "prod down", "break-glass.image-policy.k8s.io/ticket": "INC-8" };
  const res = await postJson(`${base}/imagereview`, ca, imageReview(["nginx"], "default", annotations));
  assert.equal(res.body.status.allowed, false);
  assert.match(
    res.body.status.reason,
    /break-glass was requested, but no one can be asked whether the requester may use it on this policy: an ImageReview names no user to ask about/,
  );
});

test("break-glass on the annotations alone (breakGlass.authorization: None) is written to the audit log before the answer, and warns that no one was asked", async () => {
  const open = await startTestApp({
    policies: EMBEDDED_POLICIES,
    config: { ...DEFAULT_SERVER_CONFIG, breakGlass: { authorization: "None", cacheTtlMs: 10_000 } },
  });
  try {
    const annotations = { "break-glass.image-policy.k8s.io/reason": "prod down", "break-glass.image-policy.k8s.io/ticket": "INC-7" };
    const dry = await postJson(`${open.base}/validate`, open.ca, podReview({ images: ["nginx"], annotations, dryRun: true, uid: "dry" }));
    assert.equal(dry.body.response.allowed, true);
    const res = await postJson(`${open.base}/validate`, open.ca, podReview({ images: ["nginx"], annotations, uid: "bg-1" }));
    assert.equal(res.body.response.allowed, true);
    assert.match(res.body.response.warnings[0], /break-glass override \(ticket INC-7\)/);
    assert.match(res.body.response.warnings[1], /who may use it was not checked \(the server's breakGlass.authorization is None\)/);
    const lines = (await readFile(join(open.stateDir, "audit.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((l) => l.uid),
      ["bg-1"],
    );
    assert.equal(lines[0].event, "break-glass");
    assert.equal(lines[0].ticket, "INC-7");
    assert.equal(lines[0].user, "alice");
    assert.equal(lines[0].overridden[0].image, "nginx");
  } finally {
    await open.close();
  }
});

test("non-pod resources and updates that change no image are admitted without review", async () => {
  const cm = podReview({ images: ["nginx"] });
  (cm.request as any).resource = { group: "", version: "v1", resource: "configmaps" };
  assert.equal((await postJson(`${base}/validate`, ca, cm)).body.response.allowed, true);
  const upd = podReview({ images: ["nginx"], operation: "UPDATE" });
  (upd.request as any).oldObject = structuredClone(upd.request.object);
  assert.equal((await postJson(`${base}/validate`, ca, upd)).body.response.allowed, true);
  (upd.request.object.spec.containers[0] as any).image = "busybox";
  const changed = await postJson(`${base}/validate`, ca, upd);
  assert.equal(changed.body.response.allowed, false);
  assert.match(changed.body.response.status.message, /"busybox"/);
});

// readJsonBody on its own, fed a stream of chunks.
function body(chunks: Array<string | Buffer>, headers: Record<string, string> = {}): IncomingMessage {
  const rawHeaders = Object.entries(headers).flat();
  return Object.assign(Readable.from(chunks.map((c) => (typeof c === "string" ? Buffer.from(c) : c))), { headers, rawHeaders }) as unknown as IncomingMessage;
}

test("declaredLength: Content-Length from the raw header list, whatever its case; NaN when absent", async () => {
  assert.equal(declaredLength(["Host", "x", "Content-Length", "12"]), 12);
  assert.equal(declaredLength(["content-length", "0", "Content-Type", "application/json"]), 0);
  assert.equal(declaredLength(["CONTENT-LENGTH", "70000"]), 70_000);
  assert.ok(Number.isNaN(declaredLength(["Host", "x", "Content-Lengthy", "5", "X-Content-Length", "5"])));
  assert.ok(Number.isNaN(declaredLength([])));
  // A declared length over the limit is refused before any of the body is read.
  await assert.rejects(readJsonBody(body(["{}"], { "Content-Length": "70000" }), 65_536), {
    status: 413,
    message: "request body is 70000 bytes; the limit is 65536",
  });
});
const LARGE = 16 * 1024 * 1024;

test("readJsonBody: UTF-8 split across chunks decodes; malformed UTF-8 is a 400, never U+FFFD", async () => {
  assert.deepEqual(await readJsonBody(body(['{"a":"', Buffer.from([0xc3]), Buffer.from([0xa9]), '"}']), LARGE), { a: "é" });
  for (const bad of [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80] /* an encoded surrogate */, [0xe2, 0x82] /* truncated */]) {
    await assert.rejects(readJsonBody(body(['{"a":"', Buffer.from(bad), '"}']), LARGE), (e: HttpError) => {
      assert.ok(e instanceof HttpError);
      assert.deepEqual([e.status, e.code, e.message], [400, "bad-request", "request body is not valid UTF-8"]);
      return true;
    });
  }
  // A byte-order mark is not JSON, as before.
  await assert.rejects(readJsonBody(body([Buffer.from([0xef, 0xbb, 0xbf]), "{}"]), LARGE), { status: 400, message: /not valid JSON/ });
});

test("readJsonBody: nesting up to the limit parses, one level more is a 400; 100,000 nested arrays too", async () => {
  const nested = (depth: number, open = "[", close = "]") => open.repeat(depth) + close.repeat(depth);
  assert.equal(MAX_JSON_DEPTH, 64);
  assert.ok(Array.isArray(await readJsonBody(body([nested(64)]), LARGE)));
  const tooDeep = { status: 400, code: "bad-request", message: "request body nests JSON objects and arrays more than 64 levels deep" };
  await assert.rejects(readJsonBody(body([nested(65)]), LARGE), tooDeep);
  await assert.rejects(readJsonBody(body([nested(100_000)]), LARGE), tooDeep);
  await assert.rejects(readJsonBody(body(['{"a":'.repeat(100_000) + "1" + "}".repeat(100_000)]), LARGE), tooDeep);
  assert.deepEqual(await readJsonBody(body([nested(3, "[", "]")]), LARGE, 3), [[[]]]);
  await assert.rejects(readJsonBody(body([nested(3)]), LARGE, 2), { message: /more than 2 levels deep/ });
});

test("nestsDeeperThan counts brackets outside strings only, and leaves malformed text to JSON.parse", () => {
  assert.equal(nestsDeeperThan('{"a":[1,{"b":[]}]}', 4), false);
  assert.equal(nestsDeeperThan('{"a":[1,{"b":[]}]}', 3), true);
  assert.equal(nestsDeeperThan(`{"s":"${"[".repeat(100)}"}`, 1), false);
  assert.equal(nestsDeeperThan(String.raw`{"s":"\\"}` + "[[[[", 3), true); // the string holds one escaped backslash and ends there
  assert.equal(nestsDeeperThan(String.raw`{"s":"\"[[[["}`, 1), false); // an escaped quote does not end the string
  assert.equal(nestsDeeperThan(String.raw`{"s":"\\\"[[["}`, 1), false);
  assert.equal(nestsDeeperThan(`["unterminated${"[".repeat(10)}`, 1), false);
  assert.equal(nestsDeeperThan("]]]][[", 1), false);
});

test("HttpError codes follow the status", () => {
  assert.equal(new HttpError(413, "x").code, "too-large");
  assert.equal(new HttpError(415, "x").code, "unsupported");
  assert.equal(new HttpError(400, "x").code, "bad-request");
  assert.equal(new HttpError(400, "x").name, "HttpError");
});

test("unknown fields in a review, at every level, are ignored: the review is judged as without them", async () => {
  const withUnknown = (review: ReturnType<typeof podReview>) => {
    const r = structuredClone(review) as Record<string, any>;
    r.somethingNew = { a: 1 };
    r.request.futureField = [1, 2];
    r.request.userInfo = { username: "u", groups: [], futureIdentity: "x" };
    r.request.object.spec.futurePodField = true;
    r.request.object.spec.containers[0].futureContainerField = "y";
    return r;
  };
  for (const [images, allowed] of [
    [["registry.example.com/app:1.0"], true],
    [["nginx"], false],
  ] as const) {
    const plain = await postJson(`${base}/validate`, ca, podReview({ images: [...images], uid: "u-plain" }));
    const unknown = await postJson(`${base}/validate`, ca, withUnknown(podReview({ images: [...images], uid: "u-unknown" })));
    assert.equal(unknown.status, 200);
    assert.equal(unknown.body.response.allowed, allowed);
    assert.equal(unknown.body.response.uid, "u-unknown");
    assert.deepEqual(unknown.body.response.status, plain.body.response.status);
  }
  const image = { ...imageReview(["nginx:latest"], "team-a"), futureTopLevel: 1 } as Record<string, any>;
  image.spec.futureSpecField = { z: 1 };
  const res = await postJson(`${base}/imagereview`, ca, image);
  assert.equal(res.status, 200);
  assert.equal(res.body.status.allowed, false);
});
