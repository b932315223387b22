// The authority fix for older kubelets (src/cri/unix-authority.ts): an HTTP/2 client that sends the socket's path
// as :authority, as grpc-go did in kubelets before 1.26, reaches a Node HTTP/2 server through withValidAuthority,
// while straight to it the stream is refused with PROTOCOL_ERROR. Headers keep their values, in order, over many
// requests on one connection (the client's HPACK dynamic table is followed).
import { it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { connect, createServer, type Server } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startImageServiceProxy, type RuntimeImageClient } from "../../../src/cri/image-service-proxy.ts";
import { ClientFrames, withValidAuthority } from "../../../src/cri/unix-authority.ts";

async function listen(server: Server, path: string): Promise<void> {
  await new Promise<void>((resolve) => server.listen(path, resolve));
}

function request(client: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders): Promise<{ status?: number; body: string; error?: string }> {
  return new Promise((resolve) => {
    const r = client.request(headers);
    let body = "";
    let status: number | undefined;
    r.on("response", (h) => (status = Number(h[":status"])));
    r.on("data", (d: Buffer) => (body += d.toString()));
    r.on("end", () => resolve({ status, body }));
    r.on("error", (e) => resolve({ body, error: e.message }));
    r.end();
  });
}

it("a path as :authority is replaced by localhost; other headers arrive unchanged, request after request", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-authority-"));
  const h2 = http2.createServer();
  h2.on("stream", (stream, headers) => {
    stream.respond({ ":status": 200 });
    stream.end(JSON.stringify({ authority: headers[":authority"], path: headers[":path"], team: headers["x-team"], secret: headers["x-secret"] }));
  });
  const fixed = createServer((socket) => h2.emit("connection", withValidAuthority(socket)));
  const plain = createServer((socket) => h2.emit("connection", socket));
  const fixedPath = join(dir, "fixed.sock");
  const plainPath = join(dir, "plain.sock");
  await listen(fixed, fixedPath);
  await listen(plain, plainPath);
  try {
    const direct = http2.connect("http://localhost", { createConnection: () => connect(plainPath) });
    const refused = await request(direct, { ":path": "/x", ":authority": plainPath });
    assert.match(refused.error ?? "", /PROTOCOL_ERROR/, "without the fix Node refuses the stream");
    direct.close();

    const client = http2.connect("http://localhost", { createConnection: () => connect(fixedPath) });
    for (let i = 0; i < 50; i++) {
      const path = `/runtime.v1alpha2.ImageService/${i % 2 ? "ImageStatus" : "PullImage"}`;
      const r = await request(client, { ":path": path, ":authority": fixedPath, "x-team": `team-${i % 3}`, "x-secret": "s" });
      assert.equal(r.status, 200, r.error);
      assert.deepEqual(JSON.parse(r.body), { authority: "localhost", path, team: `team-${i % 3}`, secret: "s" });
    }
    const valid = await request(client, { ":path": "/y", ":authority": "127.0.0.1:1234" });
    assert.equal(JSON.parse(valid.body).authority, "127.0.0.1:1234", "a valid authority is kept");
    const big = "v".repeat(40_000);
    const large = await request(client, { ":path": "/z", ":authority": fixedPath, "x-team": big });
    assert.equal(JSON.parse(large.body).team, big, "a header block larger than one frame is split into CONTINUATION frames");
    client.close();
  } finally {
    fixed.close();
    plain.close();
    h2.close();
    await rm(dir, { recursive: true, force: true });
  }
});

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/** One HTTP/2 frame: type, flags, stream and payload. */
function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

it("a connection that is not HTTP/2, or whose frames break a header block, is refused by code", () => {
  assert.throws(() => new ClientFrames().push(Buffer.from("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")), {
    name: "CriError",
    code: "not-http2",
    message: "not an HTTP/2 connection preface",
  });
  const CONTINUATION = 0x9;
  const HEADERS = 0x1;
  const DATA = 0x0;
  assert.throws(() => new ClientFrames().push(Buffer.concat([PREFACE, frame(CONTINUATION, 0, 1)])), {
    name: "CriError",
    code: "malformed-frames",
    message: "a CONTINUATION frame outside a header block",
  });
  assert.throws(() => new ClientFrames().push(Buffer.concat([PREFACE, frame(HEADERS, 0, 1, Buffer.from([0x82])), frame(DATA, 0, 1)])), {
    name: "CriError",
    code: "malformed-frames",
    message: "a frame inside a header block",
  });
  assert.throws(() => new ClientFrames().push(Buffer.concat([PREFACE, frame(HEADERS, 0, 1, Buffer.alloc(1024 * 1024 + 1))])), {
    name: "CriError",
    code: "header-block-too-large",
  });
});

it("the proxy serves unix:///path endpoints only", async () => {
  const runtime = {} as RuntimeImageClient;
  await assert.rejects(
    startImageServiceProxy("tcp://127.0.0.1:9000", runtime, () => Promise.reject(new Error("not called"))),
    { name: "CriError", code: "unsupported-endpoint", message: "only unix:///path endpoints are served, got tcp://127.0.0.1:9000" },
  );
});
