// Authenticated callers of `serve`: client certificates from --client-ca and bearer tokens from --caller-tokens,
// through the real HTTPS server; 401 before the body is read; health open; audit records naming the caller.
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../../src/config/config-error.ts";
import { loadCallerTokens, parseCallerTokens, tokenDigest } from "../../../src/caller-auth/caller-tokens.ts";
import { podReview } from "../../support/admission.ts";
import { createClientCa, randomToken, type ClientCa } from "../../support/caller-credentials.ts";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { startTestApp, type TestApp } from "../../support/in-process-app.ts";

const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: trusted }
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
  default: deny
  breakGlass: { allowed: true }
`;
const BREAK_GLASS = { "break-glass.image-policy.k8s.io/reason": "hotfix", "break-glass.image-policy.k8s.io/ticket": "INC-7" };

interface Sent {
  status: number;
  body: any;
  headers: Record<string, unknown>;
}

/** POSTs with optional client certificate and token; `withholdBody` sends the headers only and waits for an answer. */
function send(
  url: string,
  opts: { ca: string; cert?: { certPem: string; keyPem: string }; token?: string; body?: unknown; withholdBody?: boolean; method?: string },
): Promise<Sent> {
  const data = JSON.stringify(opts.body ?? {});
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: opts.method ?? "POST",
        ca: opts.ca,
        agent: false,
        ...(opts.cert ? { cert: opts.cert.certPem, key: opts.cert.keyPem } : {}),
        headers: {
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(data)),
          ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = text;
          }
          resolve({ status: res.statusCode ?? 0, body, headers: res.headers });
          req.destroy();
        });
      },
    );
    req.on("error", reject);
    if (opts.method === "GET") req.end();
    else if (opts.withholdBody) req.flushHeaders();
    else req.end(data);
  });
}

describe("caller tokens file", () => {
  test("tokens and their SHA-256 map to caller and cluster", () => {
    const token = "0123456789abcdef-token";
    const tokens = parseCallerTokens(
      `apiVersion: imprimatur.dev/v1alpha1
kind: CallerTokens
callers:
  - { name: apiserver-a, cluster: prod, token: "${token}" }
  - { name: apiserver-b, cluster: staging, tokenSha256: "${tokenDigest("another-token-of-16").toUpperCase()}" }
`,
      "callers.yaml",
    );
    assert.deepEqual(tokens.get(tokenDigest(token)), { name: "apiserver-a", cluster: "prod" });
    assert.deepEqual(tokens.get(tokenDigest("another-token-of-16")), { name: "apiserver-b", cluster: "staging" });
  });

  test("every problem is reported with its line and field", () => {
    const text = `apiVersion: imprimatur.dev/v1alpha1
kind: CallerTokens
callers:
  - { name: a, cluster: prod, token: short }
  - { name: "bad name", cluster: prod, tokenSha256: "nothex" }
  - { name: b, cluster: prod }
  - { name: c, cluster: prod, token: "0123456789abcdef", tokenSha256: "${tokenDigest("x")}" }
  - { name: d, cluster: prod, token: "same-token-twice-0" }
  - { name: e, cluster: prod, token: "same-token-twice-0", role: admin }
`;
    const err = (() => {
      try {
        parseCallerTokens(text, "callers.yaml");
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(err instanceof ConfigError, String(err));
    assert.equal(err.code, "invalid-config");
    const message = err.message;
    for (const expected of [
      /callers\.yaml:4 \(callers\[0\]\.token\): must be a string of at least 16 characters/,
      /callers\.yaml:5 \(callers\[1\]\.name\): must be a name/,
      /callers\.yaml:5 \(callers\[1\]\.tokenSha256\): must be the hex SHA-256/,
      /callers\.yaml:6 \(callers\[2\]\): needs exactly one of token or tokenSha256/,
      /callers\.yaml:7 \(callers\[3\]\): needs exactly one of token or tokenSha256/,
      /callers\.yaml:9 \(callers\[5\]\.role\): unknown field/,
      /callers\.yaml:9 \(callers\[5\]\): has the same token as caller "d"/,
    ])
      assert.match(message, expected);
  });

  test("a file without callers, or of another kind, is refused", async () => {
    assert.throws(() => parseCallerTokens("apiVersion: imprimatur.dev/v1alpha1\nkind: CallerTokens\n", "f.yaml"), /\(callers\): must be a list of callers/);
    assert.throws(
      () => parseCallerTokens("apiVersion: imprimatur.dev/v1alpha1\nkind: Tokens\ncallers: []\n", "f.yaml"),
      /\(kind\): must be "CallerTokens"[\s\S]*\(callers\): is empty/,
    );
    await assert.rejects(loadCallerTokens(join(tmpdir(), "no-such-callers-file.yaml")), /cannot read caller tokens file: ENOENT/);
  });
});

describe("serve with a client CA and caller tokens", () => {
  let dir: string;
  let clientCa: ClientCa;
  let otherCa: ClientCa;
  let server: TestApp;
  let openServer: TestApp;
  let token: string;
  let good: { certPem: string; keyPem: string };
  let cnOnly: { certPem: string; keyPem: string };
  let stranger: { certPem: string; keyPem: string };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "imprimatur-callers-"));
    await writeFile(join(dir, "policy.yaml"), POLICY);
    clientCa = await createClientCa();
    otherCa = await createClientCa("someone else's CA");
    good = await clientCa.issue("/CN=apiserver-a/O=cluster-a");
    cnOnly = await clientCa.issue("/CN=apiserver-b");
    stranger = await otherCa.issue("/CN=apiserver-a/O=cluster-a");
    token = randomToken();
    const tokensFile = join(clientCa.dir, "callers.yaml");
    await writeFile(
      tokensFile,
      `apiVersion: imprimatur.dev/v1alpha1\nkind: CallerTokens\ncallers:\n  - name: apiserver-t\n    cluster: cluster-t\n    tokenSha256: ${tokenDigest(token)}\n`,
    );
    // Break-glass on the annotations alone (no API to ask who may): its records are what these tests read.
    const config = { ...DEFAULT_SERVER_CONFIG, breakGlass: { authorization: "None" as const, cacheTtlMs: 10_000 } };
    server = await startTestApp({ policies: dir, config, callers: { clientCaPem: clientCa.certPem, tokens: await loadCallerTokens(tokensFile) } });
    openServer = await startTestApp({ policies: dir, config, callers: { clientCaPem: clientCa.certPem, allowUnauthenticated: true } });
  });

  after(async () => {
    await server?.close();
    await openServer?.close();
    await clientCa?.remove();
    await otherCa?.remove();
    await rm(dir, { recursive: true, force: true });
  });

  test("a caller with no credentials is refused with 401 on every review endpoint, before its body is sent", async () => {
    for (const path of ["/validate", "/mutate", "/imagereview"]) {
      const res = await send(`${server.base}${path}`, { ca: server.ca, withholdBody: true });
      assert.equal(res.status, 401, path);
      assert.equal(res.body.kind, "Status");
      assert.match(res.body.message, /unauthorized: no credentials: present a client certificate or bearer token/);
    }
    assert.equal((await send(`${server.base}/metrics`, { ca: server.ca, method: "GET" })).status, 401);
  });

  test("health and readiness need no credentials", async () => {
    for (const path of ["/healthz", "/readyz"]) assert.equal((await send(`${server.base}${path}`, { ca: server.ca, method: "GET" })).status, 200);
  });

  test("a client certificate from the CA, or a listed token, is let in", async () => {
    const byCert = await send(`${server.base}/validate`, { ca: server.ca, cert: good, body: podReview({ images: ["registry.example.com/a:1"] }) });
    assert.equal(byCert.status, 200);
    assert.equal(byCert.body.response.allowed, true);
    const byToken = await send(`${server.base}/validate`, { ca: server.ca, token, body: podReview({ images: ["registry.example.com/a:1"] }) });
    assert.equal(byToken.body.response.allowed, true);
    const metrics = await send(`${server.base}/metrics`, { ca: server.ca, token, method: "GET" });
    assert.equal(metrics.status, 200);
    // The refusals of the test before, counted by path.
    assert.match(metrics.body, /imprimatur_callers_refused_total\{path="\/validate"\} [1-9]/);
    assert.match(metrics.body, /imprimatur_callers_refused_total\{path="\/metrics"\} [1-9]/);
  });

  test("a certificate without a common name is refused; a CA file may hold two CAs (a rotation)", async () => {
    const nameless = await clientCa.issue("/O=cluster-a");
    const res = await send(`${server.base}/validate`, { ca: server.ca, cert: nameless, withholdBody: true });
    assert.equal(res.status, 401);
    assert.match(res.body.message, /the client certificate has no common name \(CN\) to name the caller/);

    const both = await startTestApp({ policies: dir, callers: { clientCaPem: clientCa.certPem + otherCa.certPem } });
    try {
      for (const cert of [good, stranger]) {
        const admitted = await send(`${both.base}/validate`, { ca: both.ca, cert, body: podReview({ images: ["registry.example.com/a:1"] }) });
        assert.equal(admitted.body.response.allowed, true);
      }
    } finally {
      await both.close();
    }
  });

  test("a certificate from another CA, or an unknown token, is refused even where no credentials would be let in", async () => {
    for (const target of [server, openServer]) {
      const foreign = await send(`${target.base}/validate`, { ca: target.ca, cert: stranger, withholdBody: true });
      assert.equal(foreign.status, 401);
      assert.match(foreign.body.message, /the client certificate is not accepted/);
    }
    const wrongToken = await send(`${server.base}/validate`, { ca: server.ca, token: randomToken(), withholdBody: true });
    assert.match(wrongToken.body.message, /the bearer token is not one of the caller tokens/);
    const basic = await send(`${server.base}/validate`, { ca: server.ca, token: "x", withholdBody: true });
    assert.equal(basic.status, 401);
    // A valid certificate does not excuse a wrong token beside it.
    assert.equal((await send(`${server.base}/validate`, { ca: server.ca, cert: good, token: randomToken(), withholdBody: true })).status, 401);
  });

  test("audit records name the caller and its cluster, or say that none was authenticated", async () => {
    const review = (uid: string) => podReview({ images: ["docker.io/library/nginx:1"], annotations: BREAK_GLASS, uid });
    assert.equal((await send(`${server.base}/validate`, { ca: server.ca, cert: good, body: review("by-cert") })).body.response.allowed, true);
    assert.equal((await send(`${server.base}/validate`, { ca: server.ca, cert: cnOnly, body: review("by-cn") })).body.response.allowed, true);
    assert.equal((await send(`${server.base}/validate`, { ca: server.ca, token, body: review("by-token") })).body.response.allowed, true);
    assert.equal((await send(`${openServer.base}/validate`, { ca: openServer.ca, body: review("anonymous") })).body.response.allowed, true);

    const records = async (t: TestApp) =>
      (await readFile(join(t.stateDir, "audit.jsonl"), "utf8"))
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
    const byUid = new Map([...(await records(server)), ...(await records(openServer))].map((r) => [r.uid, r]));
    assert.deepEqual(byUid.get("by-cert").caller, { authenticated: true, authentication: "client-certificate", name: "apiserver-a", cluster: "cluster-a" });
    assert.deepEqual(byUid.get("by-cn").caller, { authenticated: true, authentication: "client-certificate", name: "apiserver-b", cluster: "apiserver-b" });
    assert.deepEqual(byUid.get("by-token").caller, { authenticated: true, authentication: "token", name: "apiserver-t", cluster: "cluster-t" });
    assert.deepEqual(byUid.get("anonymous").caller, { authenticated: false });
    assert.equal(byUid.get("anonymous").event, "break-glass");
  });
});
