// Kubelets before 1.26 dial their CRI sockets with grpc-go's default authority, the socket's path, and send it as
// the HTTP/2 `:authority` of every call. Node's HTTP/2 (nghttp2) refuses a stream whose authority holds "/" with
// PROTOCOL_ERROR, so such a kubelet could not talk to a Node gRPC server at all. (Kubernetes later sets
// "localhost" for unix sockets, as gRPC itself does.)
//
// This sits between the accepted unix connection and the gRPC server: frames from the client pass through as they
// are, except header blocks, which are decoded (HPACK, with hpack.js, keeping the client's dynamic table) and sent
// on re-encoded without indexing, with an authority that is not valid for HTTP replaced by "localhost". Frames
// from the server go back unchanged. No HTTP/2 library accepts such an authority or exposes its frames, hence
// the few lines of frame handling here.
import { createRequire } from "node:module";
import { Duplex } from "node:stream";
import type { Socket } from "node:net";
import { CriError } from "./cri-error.ts";

interface HpackHeader {
  name: string;
  value: string;
  neverIndex: boolean;
}
interface HpackDecompressor {
  write(block: Buffer): void;
  execute(): void;
  read(): HpackHeader | null;
}
const hpack = createRequire(import.meta.url)("hpack.js") as { decompressor: { create(o: { table: { size: number } }): HpackDecompressor } };

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const FRAME_HEADER = 9;
const HEADERS = 0x1;
const CONTINUATION = 0x9;
const END_STREAM = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY = 0x20;
/** The smallest SETTINGS_MAX_FRAME_SIZE a peer may set, so always accepted. */
const MAX_FRAME_PAYLOAD = 16_384;
/** Node's default SETTINGS_HEADER_TABLE_SIZE, which the client's encoder must stay within. */
const HEADER_TABLE_SIZE = 4096;
/** A header block that has not ended after this many bytes is refused (HPACK bombs). */
const MAX_HEADER_BLOCK = 1024 * 1024;
/** What an authority may hold (RFC 3986 host, port, userinfo characters). */
const VALID_AUTHORITY = /^[A-Za-z0-9\-._~!$&'()*+,;=:@[\]%]*$/;

/** Wraps an accepted connection so the gRPC server sees valid authorities; give the result to the server. */
export function withValidAuthority(socket: Socket): Duplex {
  const rewriter = new ClientFrames();
  const duplex = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk: Buffer, _encoding, callback) {
      socket.write(chunk, callback);
    },
    final(callback) {
      socket.end(callback);
    },
    destroy(err, callback) {
      socket.destroy(err ?? undefined);
      callback(err);
    },
  });
  socket.on("data", (chunk: Buffer) => {
    let out: Buffer[];
    try {
      out = rewriter.push(chunk);
    } catch (e) {
      duplex.destroy(e as Error);
      return;
    }
    for (const b of out) if (!duplex.push(b)) socket.pause();
  });
  socket.on("end", () => duplex.push(null));
  socket.on("error", (e) => duplex.destroy(e));
  socket.on("close", () => duplex.destroy());
  return duplex;
}

/** The client's byte stream, frame by frame, with header blocks rewritten. */
export class ClientFrames {
  private buffered: Buffer = Buffer.alloc(0);
  private prefaceSeen = false;
  private readonly decoder = hpack.decompressor.create({ table: { size: HEADER_TABLE_SIZE } });
  private pending: { streamId: number; flags: number; priority: Buffer | undefined; fragments: Buffer[]; size: number } | undefined;

  push(chunk: Buffer): Buffer[] {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const out: Buffer[] = [];
    if (!this.prefaceSeen) {
      if (this.buffered.length < PREFACE.length) return out;
      if (!this.buffered.subarray(0, PREFACE.length).equals(PREFACE)) throw new CriError("not-http2", "not an HTTP/2 connection preface");
      out.push(this.buffered.subarray(0, PREFACE.length));
      this.buffered = this.buffered.subarray(PREFACE.length);
      this.prefaceSeen = true;
    }
    while (this.buffered.length >= FRAME_HEADER) {
      const length = this.buffered.readUIntBE(0, 3);
      if (this.buffered.length < FRAME_HEADER + length) break;
      const frame = this.buffered.subarray(0, FRAME_HEADER + length);
      this.buffered = this.buffered.subarray(FRAME_HEADER + length);
      out.push(...this.frame(frame));
    }
    return out;
  }

  private frame(frame: Buffer): Buffer[] {
    const type = frame[3]!;
    const flags = frame[4]!;
    const streamId = frame.readUInt32BE(5) & 0x7fffffff;
    const payload = frame.subarray(FRAME_HEADER);
    if (type === HEADERS) {
      if (this.pending) throw new CriError("malformed-frames", "a HEADERS frame inside another header block");
      let start = 0;
      let end = payload.length;
      if (flags & PADDED) {
        const pad = payload[0] ?? 0;
        start = 1;
        end -= pad;
      }
      let priority: Buffer | undefined;
      if (flags & PRIORITY) {
        priority = payload.subarray(start, start + 5);
        start += 5;
      }
      if (end < start) throw new CriError("malformed-frames", "a HEADERS frame shorter than its padding");
      this.pending = { streamId, flags, priority, fragments: [payload.subarray(start, end)], size: end - start };
    } else if (type === CONTINUATION) {
      if (!this.pending || this.pending.streamId !== streamId) throw new CriError("malformed-frames", "a CONTINUATION frame outside a header block");
      this.pending.fragments.push(payload);
      this.pending.size += payload.length;
    } else {
      if (this.pending) throw new CriError("malformed-frames", "a frame inside a header block");
      return [frame];
    }
    if (this.pending.size > MAX_HEADER_BLOCK) throw new CriError("header-block-too-large", "header block too large");
    if (!(flags & END_HEADERS)) return [];
    const block = this.pending;
    this.pending = undefined;
    return headerFrames(block.streamId, block.flags & END_STREAM, block.priority, encodeLiterally(this.decode(Buffer.concat(block.fragments))));
  }

  private decode(block: Buffer): HpackHeader[] {
    this.decoder.write(block);
    this.decoder.execute();
    const headers: HpackHeader[] = [];
    for (let h = this.decoder.read(); h !== null; h = this.decoder.read()) {
      headers.push(h.name === ":authority" && !VALID_AUTHORITY.test(h.value) ? { ...h, value: "localhost" } : h);
    }
    return headers;
  }
}

/** A header block of literals that neither use nor change the receiver's dynamic table. */
function encodeLiterally(headers: readonly HpackHeader[]): Buffer {
  const parts: Buffer[] = [];
  for (const h of headers) {
    // 0000xxxx: literal without indexing, new name; 0001xxxx: never indexed (kept for values marked so).
    parts.push(Buffer.from([h.neverIndex ? 0x10 : 0x00]), hpackString(h.name), hpackString(h.value));
  }
  return Buffer.concat(parts);
}

function hpackString(s: string): Buffer {
  const bytes = Buffer.from(s, "utf8");
  return Buffer.concat([hpackInteger(bytes.length, 7, 0x00), bytes]);
}

/** RFC 7541 5.1: an integer with an N-bit prefix. */
function hpackInteger(value: number, prefixBits: number, firstByteFlags: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([firstByteFlags | value]);
  const out = [firstByteFlags | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Buffer.from(out);
}

function headerFrames(streamId: number, endStream: number, priority: Buffer | undefined, block: Buffer): Buffer[] {
  const payload = priority ? Buffer.concat([priority, block]) : block;
  const frames: Buffer[] = [];
  let offset = 0;
  do {
    const chunk = payload.subarray(offset, offset + MAX_FRAME_PAYLOAD);
    const first = offset === 0;
    offset += chunk.length;
    const header = Buffer.alloc(FRAME_HEADER);
    header.writeUIntBE(chunk.length, 0, 3);
    header[3] = first ? HEADERS : CONTINUATION;
    header[4] = (first ? endStream | (priority ? PRIORITY : 0) : 0) | (offset >= payload.length ? END_HEADERS : 0);
    header.writeUInt32BE(streamId, 5);
    frames.push(header, chunk);
  } while (offset < payload.length);
  return frames;
}
