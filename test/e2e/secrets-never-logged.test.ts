// Secrets never leave in what the server writes: every log line, every answer, the audit log and the metrics of a
// server that pulls with a password from its authfile against a real docker-registry with Bearer tokens, is denied
// access to another repository, fails with a wrong password, and refuses callers with a wrong token, are scanned
// for the registry passwords (as given, and as the Basic credential that carries them), the caller tokens, and any
// JWT (the registry's tokens are JWTs): none may appear.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { Writable } from "node:stream";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { registryAccess } from "../../src/cli/registry-access.ts";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { tokenDigest } from "../../src/caller-auth/caller-tokens.ts";
import { registrySettingsMap } from "../../src/registry/registry-settings.ts";
import { podReview } from "../support/admission.ts";
import { getText, postJson, type HttpResult } from "../support/https-client.ts";
import { startTestApp, type TestApp } from "../support/in-process-app.ts";
import { buildOciLayout } from "../support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { teardown } from "../support/teardown.ts";

const PUSHER = { username: "pusher", password: "pusher-Secret-7f3a9c" };
const PULLER = { username: "puller", password: "puller-Secret-2b8d41", pull: ["team/**"], push: false };
const CALLER_TOKEN = "caller-token-5e1f0a9d7c3b2e48";
const WRONG_CALLER_TOKEN = "wrong-token-9d8c7b6a5f4e3d2c";

let registry: TestRegistry;
let dir: string;
const apps: TestApp[] = [];
/** Everything the servers wrote or answered. */
const written: string[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-secrets-"));
  registry = await startRegistry({ auth: "token", users: [PUSHER, PULLER] });
  for (const repository of ["team/app", "other/app"]) {
    const layout = buildOciLayout({ tag: "v1", seed: repository });
    try {
      await registry.push(layout.layoutDir, "v1", repository, "v1");
    } finally {
      await rm(layout.layoutDir, { recursive: true, force: true });
    }
  }
});

after(() => teardown([...apps.map((a) => () => a.close()), () => registry?.stop(), () => (dir ? rm(dir, { recursive: true, force: true }) : undefined)]));

/** A server pinning the registry's images with the given password, its every log line kept. */
async function server(name: string, password: string): Promise<TestApp> {
  const authFile = join(dir, `${name}.auth.json`);
  const basic = Buffer.from(`${PULLER.username}:${password}`).toString("base64");
  await writeFile(authFile, JSON.stringify({ auths: { [registry.host]: { auth: basic } } }));
  await writeFile(
    join(dir, `${name}.yaml`),
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pin}
spec:
  rules: [{action: allow, images: ["${registry.host}/*"], digestMutate: true}]
`,
  );
  const { staticCredentials } = await registryAccess({ authFile });
  const logger = pino(
    { level: "debug" },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        written.push(chunk.toString("utf8"));
        done();
      },
    }),
  );
  const app = await startTestApp({
    policies: join(dir, `${name}.yaml`),
    config: { ...DEFAULT_SERVER_CONFIG, failOpen: false },
    logger,
    registries: registrySettingsMap(registry.settings()),
    ...(staticCredentials ? { staticCredentials } : {}),
    // The caller's cluster is the server's own (--cluster-name home).
    clusters: { home: "home", others: new Map() },
    callers: { tokens: new Map([[tokenDigest(CALLER_TOKEN), { name: "ci", cluster: "home" }]]) },
  });
  apps.push(app);
  return app;
}

async function call(app: TestApp, path: string, body: unknown, token: string): Promise<HttpResult> {
  const answer = await postJson(`${app.base}${path}`, app.ca, body, { headers: { authorization: `Bearer ${token}` } });
  written.push(answer.text);
  return answer;
}

test("passwords, Basic credentials, caller tokens and registry tokens appear in no log line, answer, audit record or metric", async () => {
  const good = await server("good", PULLER.password);
  const pinned = await call(good, "/mutate", podReview({ images: [`${registry.host}/team/app:v1`] }), CALLER_TOKEN);
  assert.equal(pinned.body.response.allowed, true, pinned.text);
  assert.ok(pinned.body.response.patch, "pinned: the password and a registry token were used");
  const refused = await call(good, "/mutate", podReview({ images: [`${registry.host}/other/app:v1`] }), CALLER_TOKEN);
  assert.equal(refused.body.response.allowed, false, "no access to that repository");
  const wrongCaller = await call(good, "/validate", podReview({ images: [`${registry.host}/team/app:v1`] }), WRONG_CALLER_TOKEN);
  assert.equal(wrongCaller.status, 401);

  const bad = await server("bad", "not-the-Password-0c4e");
  const unauthorized = await call(bad, "/mutate", podReview({ images: [`${registry.host}/team/app:v1`] }), CALLER_TOKEN);
  assert.equal(unauthorized.body.response.allowed, false, "a wrong password");
  assert.match(unauthorized.body.response.status.message, /unauthorized|401/i, "the registry's refusal is in the answer");

  for (const app of apps) {
    const metrics = await getText(`${app.base}/metrics`, app.ca, { authorization: `Bearer ${CALLER_TOKEN}` });
    assert.equal(metrics.status, 200);
    written.push(metrics.text);
    written.push(await readFile(join(app.stateDir, "audit.jsonl"), "utf8").catch(() => ""));
  }
  const everything = written.join("\n");
  assert.ok(everything.includes(`${registry.host}/team/app`) && everything.includes("imprimatur_decisions_total"), "the scan reads what was written");
  const secrets = [
    ["a password", PULLER.password],
    ["a password", PUSHER.password],
    ["a wrong password", "not-the-Password-0c4e"],
    ["a Basic credential", Buffer.from(`${PULLER.username}:${PULLER.password}`).toString("base64")],
    ["a Basic credential", Buffer.from(`${PULLER.username}:not-the-Password-0c4e`).toString("base64")],
    ["a caller token", CALLER_TOKEN],
    ["a caller token", WRONG_CALLER_TOKEN],
  ] as const;
  for (const [what, secret] of secrets) assert.ok(!everything.includes(secret), `${what} was written: …${excerpt(everything, secret)}…`);
  const jwt = /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}/.exec(everything);
  assert.equal(jwt, null, `a token (JWT) was written: …${jwt ? excerpt(everything, jwt[0]) : ""}…`);
});

function excerpt(text: string, secret: string): string {
  const at = text.indexOf(secret);
  return text.slice(Math.max(0, at - 200), at + secret.length + 50);
}
