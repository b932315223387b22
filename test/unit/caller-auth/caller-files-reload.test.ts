// `serve --client-ca FILE --caller-tokens FILE` rereads both files: a rotated client CA or token list is used
// without a restart, and a file that does not parse is logged with its file and line while the previous one stays.
// The real command runs as a child; client certificates are made with the openssl command.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CallerAuthenticator, parseClientCa, type CallerCredentials } from "../../../src/caller-auth/caller-auth.ts";
import { tokenDigest } from "../../../src/caller-auth/caller-tokens.ts";
import { callerTokensYaml, createClientCa, replaceFile } from "../../support/caller-credentials.ts";
import { startServeWithLines, type ServeWithLines } from "../../support/serve-lines.ts";

/** The status of GET /metrics (which needs an authenticated caller) with a client certificate or a bearer token. */
function metricsStatus(port: number, as: { cert?: { certPem: string; keyPem: string }; token?: string }): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/metrics",
        rejectUnauthorized: false,
        agent: false,
        ...(as.cert ? { cert: as.cert.certPem, key: as.cert.keyPem } : {}),
        headers: as.token ? { authorization: `Bearer ${as.token}` } : {},
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** Asks until the answer is `status` (the server rereads its files every few seconds). */
async function untilStatus(ask: () => Promise<number>, status: number): Promise<void> {
  while ((await ask()) !== status) await new Promise((r) => setTimeout(r, 200));
}

test("a rotated client CA and token list are used without a restart; a broken file is logged with its line and the previous stays", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-caller-reload-"));
  const oldCa = await createClientCa("old caller CA");
  const newCa = await createClientCa("new caller CA");
  const caFile = join(dir, "client-ca.crt");
  const callersFile = join(dir, "callers.yaml");
  const oldToken = randomBytes(24).toString("hex");
  const newToken = randomBytes(24).toString("hex");
  await writeFile(caFile, oldCa.certPem);
  await writeFile(callersFile, callerTokensYaml([{ name: "apiserver-old", token: oldToken }]));
  let serve: ServeWithLines | undefined;
  try {
    serve = await startServeWithLines(["--client-ca", caFile, "--client-ca-allowed-names", "apiserver-old,apiserver-new", "--caller-tokens", callersFile], {
      stateDir: join(dir, "state"),
    });
    const port = serve.port;
    const oldClient = await oldCa.issue("/CN=apiserver-old/O=prod");
    const newClient = await newCa.issue("/CN=apiserver-new/O=prod");
    assert.equal(await metricsStatus(port, { cert: oldClient }), 200);
    assert.equal(await metricsStatus(port, { cert: newClient }), 401);
    assert.equal(await metricsStatus(port, { token: oldToken }), 200);
    assert.equal(await metricsStatus(port, { token: newToken }), 401);

    // The CA rotation: both CAs for a while, then the new one alone.
    await replaceFile(caFile, oldCa.certPem + newCa.certPem);
    await untilStatus(() => metricsStatus(port, { cert: newClient }), 200);
    assert.equal(await metricsStatus(port, { cert: oldClient }), 200);
    await replaceFile(caFile, newCa.certPem);
    await untilStatus(() => metricsStatus(port, { cert: oldClient }), 401);
    assert.equal(await metricsStatus(port, { cert: newClient }), 200);

    // A CA file cut short: its broken certificate is named by line, and the CA in use stays.
    const caRefused = serve.line(/client CA: the new files are not usable/, serve.lines.length);
    await replaceFile(caFile, `${newCa.certPem}${oldCa.certPem.slice(0, 200)}`);
    assert.match(await caRefused, new RegExp(`client-ca\\.crt:${newCa.certPem.trimEnd().split("\n").length + 1}: not a readable certificate`));
    assert.equal(await metricsStatus(port, { cert: newClient }), 200);

    // The token rotation.
    await replaceFile(callersFile, callerTokensYaml([{ name: "apiserver-new", token: newToken }]));
    await untilStatus(() => metricsStatus(port, { token: newToken }), 200);
    assert.equal(await metricsStatus(port, { token: oldToken }), 401);

    // A tokens file with a token too short: the problem with its line; the tokens in use stay.
    const tokensRefused = serve.line(/caller tokens: the new files are not usable/, serve.lines.length);
    await replaceFile(callersFile, callerTokensYaml([{ name: "apiserver-new", token: "short" }]));
    assert.match(await tokensRefused, /callers\.yaml:6 \(callers\[0\]\.token\): must be a string of at least 16 characters/);
    assert.equal(await metricsStatus(port, { token: newToken }), 200);

    assert.ok(serve.running(), "the same process throughout");
    assert.equal(await serve.stop(), 0);
  } finally {
    await serve?.kill();
    await oldCa.remove();
    await newCa.remove();
    await rm(dir, { recursive: true, force: true });
  }
});

test("a client CA file is checked certificate by certificate, a broken one named by its line", async () => {
  const ca = await createClientCa();
  try {
    assert.equal(parseClientCa(ca.certPem + ca.certPem, "ca.crt"), ca.certPem + ca.certPem);
    assert.throws(() => parseClientCa("hello\n", "ca.crt"), { code: "no-certificate", message: "ca.crt holds no PEM certificate" });
    const lines = ca.certPem.trimEnd().split("\n").length;
    const broken = `${ca.certPem}# the next one was cut short\n-----BEGIN CERTIFICATE-----\nMIIB\n`;
    assert.throws(() => parseClientCa(broken, "ca.crt"), {
      code: "bad-certificate",
      message: new RegExp(`^ca\\.crt:${lines + 2}: not a readable certificate`),
    });
  } finally {
    await ca.remove();
  }
});

test("only what was configured at start is replaced: a server without a client CA does not start asking for one", () => {
  let push: ((next: CallerCredentials) => void) | undefined;
  const updates = { subscribe: (listener: (next: CallerCredentials) => void) => ((push = listener), () => undefined) };
  const tokensOnly = new CallerAuthenticator({ tokens: new Map([[tokenDigest("a".repeat(16)), { name: "a", cluster: "a" }]]), updates });
  const changes: string[] = [];
  tokensOnly.onClientCaChange((pem) => changes.push(pem));
  push!({ clientCaPem: "-----BEGIN CERTIFICATE-----" });
  assert.equal(tokensOnly.clientCaPem, undefined);
  assert.equal(changes.length, 0, "no client CA to announce");

  const withCa = new CallerAuthenticator({ clientCaPem: "old", updates });
  withCa.onClientCaChange((pem) => changes.push(pem));
  push!({ clientCaPem: "new" });
  push!({ clientCaPem: "new" });
  assert.equal(withCa.clientCaPem, "new");
  assert.deepEqual(changes, ["new"], "an unchanged CA is not announced again");
});
