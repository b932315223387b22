// Keep-alive connections of callers whose credentials were removed: a token dropped from --caller-tokens, or the
// CA of a client certificate dropped from --client-ca. The idle connection is closed when the file is reread, and a
// request on a connection made with the removed credential is refused with 401, never answered. The real command
// runs as a child, reached through node:https keep-alive agents as kube-apiserver's webhook client keeps its own.
import { test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { Agent, request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type TLSSocket } from "node:tls";
import { podReview } from "../../support/admission.ts";
import { callerTokensYaml, createClientCa, randomToken, replaceFile } from "../../support/caller-credentials.ts";
import { startTestApp } from "../../support/in-process-app.ts";
import { logMessage, startServeWithLines, type ServeWithLines } from "../../support/serve-lines.ts";
import { EMBEDDED_POLICIES } from "../../../src/cli/args.ts";
import type { CallerCredentials } from "../../../src/caller-auth/caller-auth.ts";

interface Answer {
  status: number;
  message: string;
  socket: TLSSocket;
}

/** GET /metrics (authenticated callers only) through `agent`; the status, the message of a refusal and the connection used. */
function metrics(port: number, agent: Agent, token?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/metrics", agent, headers: token ? { authorization: `Bearer ${token}` } : {} }, (res) => {
      // Taken now: the agent takes the connection back once the answer is read.
      const socket = res.socket as TLSSocket;
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolve({ status: res.statusCode ?? 0, message: res.statusCode === 401 ? JSON.parse(text).message : "", socket });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/** Whether `socket` closes within `ms`. */
async function closesWithin(socket: TLSSocket, ms: number): Promise<boolean> {
  if (socket.destroyed) return true;
  let timer: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    once(socket, "close").then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
  ]);
  clearTimeout(timer);
  return closed;
}

test("keep-alive connections of a removed token or a removed client CA are closed; the next request is refused with 401", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-caller-keepalive-"));
  const oldCa = await createClientCa("old caller CA");
  const newCa = await createClientCa("new caller CA");
  const caFile = join(dir, "client-ca.crt");
  const callersFile = join(dir, "callers.yaml");
  const removedToken = randomToken();
  const keptToken = randomToken();
  await writeFile(caFile, oldCa.certPem + newCa.certPem);
  await writeFile(
    callersFile,
    callerTokensYaml([
      { name: "apiserver-removed", token: removedToken },
      { name: "apiserver-kept", token: keptToken },
    ]),
  );
  const agents: Agent[] = [];
  let serve: ServeWithLines | undefined;
  try {
    const stateDir = join(dir, "state");
    serve = await startServeWithLines(["--client-ca", caFile, "--client-ca-allowed-names", "apiserver-a", "--caller-tokens", callersFile], { stateDir });
    const port = serve.port;
    const ca = await readFile(join(stateDir, "ca.crt"), "utf8");
    const keepAlive = (cert?: { certPem: string; keyPem: string }) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1, ca, ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}) });
      agents.push(agent);
      return agent;
    };
    const byRemovedToken = keepAlive();
    const byKeptToken = keepAlive();
    const byOldCa = keepAlive(await oldCa.issue("/CN=apiserver-a/O=prod"));
    const byNewCa = keepAlive(await newCa.issue("/CN=apiserver-a/O=prod"));

    const removedTokenFirst = await metrics(port, byRemovedToken, removedToken);
    const keptTokenFirst = await metrics(port, byKeptToken, keptToken);
    const oldCaFirst = await metrics(port, byOldCa);
    const newCaFirst = await metrics(port, byNewCa);
    for (const answer of [removedTokenFirst, keptTokenFirst, oldCaFirst, newCaFirst]) assert.equal(answer.status, 200);
    // The agents keep each connection for the next request.
    assert.equal((await metrics(port, byRemovedToken, removedToken)).socket, removedTokenFirst.socket);

    // The token is removed: its idle connection is closed; the others stay open.
    const tokensReloaded = serve.line(logMessage("caller tokens: reloaded from the files"), serve.lines.length);
    await replaceFile(callersFile, callerTokensYaml([{ name: "apiserver-kept", token: keptToken }]));
    await tokensReloaded;
    assert.ok(await closesWithin(removedTokenFirst.socket, 3000), "the connection of the removed token is closed");
    const afterRemoval = await metrics(port, byRemovedToken, removedToken);
    assert.equal(afterRemoval.status, 401);
    assert.match(afterRemoval.message, /the bearer token is not one of the caller tokens/);
    assert.equal(keptTokenFirst.socket.destroyed, false, "the connection of a token still listed stays open");
    const kept = await metrics(port, byKeptToken, keptToken);
    assert.equal(kept.status, 200);
    assert.equal(kept.socket, keptTokenFirst.socket);

    // The old CA is removed: connections made with its certificates are closed; those of the new CA stay.
    const caReloaded = serve.line(logMessage("client CA: reloaded from the files"), serve.lines.length);
    await replaceFile(caFile, newCa.certPem);
    await caReloaded;
    assert.ok(await closesWithin(oldCaFirst.socket, 3000), "the connection of the removed CA's certificate is closed");
    const oldCaAfter = await metrics(port, byOldCa);
    assert.equal(oldCaAfter.status, 401);
    assert.match(oldCaAfter.message, /the client certificate is not accepted/);
    assert.equal(newCaFirst.socket.destroyed, false, "the connection of a certificate of the CA still listed stays open");
    const newCaAfter = await metrics(port, byNewCa);
    assert.equal(newCaAfter.status, 200);
    assert.equal(newCaAfter.socket, newCaFirst.socket);
    assert.equal(await serve.stop(), 0);
  } finally {
    for (const agent of agents) agent.destroy();
    await serve?.kill();
    await oldCa.remove();
    await newCa.remove();
    await rm(dir, { recursive: true, force: true });
  }
});

/** Reads what the server sends on `socket` until it closes it, or `ms` pass. */
async function readUntilClosed(socket: TLSSocket, ms: number): Promise<{ text: string; closed: boolean }> {
  let text = "";
  socket.on("data", (c: Buffer) => (text += c.toString("utf8")));
  return { closed: await closesWithin(socket, ms), text };
}

/**
 * A connection with a POST /validate in flight: the server has authenticated it (it answers an `Expect:
 * 100-continue` only after that) and waits for the body.
 */
async function requestInFlight(port: number, ca: string, cert: { certPem: string; keyPem: string }, uid: string) {
  const socket = connect({ host: "127.0.0.1", port, ca, cert: cert.certPem, key: cert.keyPem });
  await once(socket, "secureConnect");
  const body = JSON.stringify(podReview({ images: ["registry.example.com/app:1"], uid }));
  socket.write(
    `POST /validate HTTP/1.1\r\nHost: imprimatur\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`,
  );
  const [continued] = (await once(socket, "data")) as [Buffer];
  assert.match(continued.toString("utf8"), /^HTTP\/1\.1 100 Continue/);
  return { socket, body };
}

function statuses(text: string): string[] {
  return [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]!);
}

test("a request on a connection whose client CA was removed while it was busy is refused with 401; the answer in flight is given, then the connection closes", async () => {
  const callerCa = await createClientCa("caller CA");
  const otherCa = await createClientCa("other CA");
  let push: ((next: CallerCredentials) => void) | undefined;
  const updates = { subscribe: (listener: (next: CallerCredentials) => void) => ((push = listener), () => undefined) };
  const server = await startTestApp({
    policies: EMBEDDED_POLICIES,
    callers: { clientCaPem: callerCa.certPem + otherCa.certPem, allowedNames: ["apiserver-a"], updates },
  });
  const sockets: TLSSocket[] = [];
  try {
    const cert = await callerCa.issue("/CN=apiserver-a/O=prod");
    const pipelining = await requestInFlight(server.app.port, server.ca, cert, "pipelining");
    const single = await requestInFlight(server.app.port, server.ca, cert, "single");
    sockets.push(pipelining.socket, single.socket);

    push!({ clientCaPem: otherCa.certPem });
    const reading = [readUntilClosed(pipelining.socket, 5000), readUntilClosed(single.socket, 5000)];
    // The body of the request in flight, and on one connection a second request right behind it.
    pipelining.socket.write(`${pipelining.body}GET /metrics HTTP/1.1\r\nHost: imprimatur\r\n\r\n`);
    single.socket.write(single.body);
    const [behind, alone] = await Promise.all(reading);
    assert.deepEqual(statuses(behind!.text), ["200", "401"], behind!.text);
    assert.match(behind!.text, /"uid":"pipelining"/);
    assert.match(behind!.text, /the client certificate's CA is no longer one of the client CAs/);
    assert.ok(behind!.closed, "the connection is closed");
    assert.deepEqual(statuses(alone!.text), ["200"], alone!.text);
    assert.match(alone!.text, /"uid":"single"/);
    assert.ok(alone!.closed, "the connection is closed once its answer is given");
  } finally {
    for (const socket of sockets) socket.destroy();
    await server.close();
    await callerCa.remove();
    await otherCa.remove();
  }
});
