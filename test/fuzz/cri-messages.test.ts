// Property-based tests of the CRI image-service messages the node proxy reads (src/cri/cri-messages.ts): whatever
// bytes arrive — valid messages mutated, messages built field by field with any wire type and lying lengths,
// nested, concatenated, or anything at all — each decoder gives a well-typed message or a CriMessageError
// (malformed-message), nothing else; a valid message round-trips through its encoder.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import fc from "fast-check";
import protobuf from "protobufjs";
import {
  CriMessageError,
  decodeImageStatusRequest,
  decodeImageStatusResponse,
  decodeListImagesResponse,
  decodePullImageRequest,
  pullImageRequestFor,
  decodePullImageResponse,
  decodeRemoveImageRequest,
  encodeImageStatusRequest,
  encodeImageStatusRequestFor,
  encodePullImageRequest,
  encodePullImageResponse,
  encodeRemoveImageRequest,
  IMAGE_ABSENT_RESPONSE,
  LIST_ALL_IMAGES_REQUEST,
} from "../../src/cri/cri-messages.ts";
import { ImprimaturError } from "../../src/errors/imprimatur-error.ts";
import { checkProperty } from "../support/fuzz.ts";

const FILE = "test/fuzz/cri-messages.test.ts";
// The responses have no encoder in the module (the proxy only reads them): protobufjs over the same .proto.
const proto = protobuf.loadSync(fileURLToPath(new URL("../../src/cri/image-service.proto", import.meta.url)));
const ImageStatusResponse = proto.lookupType("imprimatur.cri.ImageStatusResponse");
const ListImagesResponse = proto.lookupType("imprimatur.cri.ListImagesResponse");
const encode = (t: protobuf.Type, value: Record<string, unknown>) => Buffer.from(t.encode(t.fromObject(value)).finish());

// ---------------------------------------------------------------------------------------------
// Well-formed values: what each decoder may return.

const isStringRecord = (v: unknown) =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v as Record<string, unknown>).every((x) => typeof x === "string");
const isStringList = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === "string");

function assertImageSpec(spec: { image: unknown; annotations: unknown }) {
  assert.equal(typeof spec.image, "string");
  assert.ok(isStringRecord(spec.annotations), JSON.stringify(spec.annotations));
}

function assertImage(image: { id: unknown; repoTags: unknown; repoDigests: unknown }) {
  assert.equal(typeof image.id, "string");
  assert.ok(isStringList(image.repoTags) && isStringList(image.repoDigests));
}

const DECODERS: Record<string, (bytes: Uint8Array) => void> = {
  ImageStatusRequest: (b) => assertImageSpec(decodeImageStatusRequest(b).image),
  RemoveImageRequest: (b) => assertImageSpec(decodeRemoveImageRequest(b).image),
  ImageStatusResponse: (b) => {
    const image = decodeImageStatusResponse(b);
    if (image !== undefined) {
      assertImage(image);
      assert.notEqual(image.id, "");
    }
  },
  PullImageRequest: (b) => {
    const req = decodePullImageRequest(b);
    assertImageSpec(req.image);
    if (req.auth !== undefined)
      for (const k of ["username", "password", "auth", "serverAddress", "identityToken", "registryToken"] as const) assert.equal(typeof req.auth[k], "string");
    if (req.sandbox !== undefined) {
      assert.ok(isStringRecord(req.sandbox.annotations));
      if (req.sandbox.metadata) for (const k of ["name", "uid", "namespace"] as const) assert.equal(typeof req.sandbox.metadata[k], "string");
    }
  },
  PullImageResponse: (b) => assert.equal(typeof decodePullImageResponse(b).imageRef, "string"),
  ListImagesResponse: (b) => {
    const images = decodeListImagesResponse(b);
    assert.ok(Array.isArray(images));
    for (const image of images) assertImage(image);
  },
};

/** Every decoder on `bytes`: a well-typed message or a CriMessageError; counts which. */
function decodeAll(bytes: Uint8Array, counts: { decoded: number; refused: number }) {
  for (const [name, check] of Object.entries(DECODERS)) {
    try {
      check(bytes);
      counts.decoded++;
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      if (!(e instanceof CriMessageError)) throw new Error(`${name}: an untyped error escaped: ${String(e)}`, { cause: e });
      assert.ok(e instanceof ImprimaturError);
      assert.equal(e.code, "malformed-message");
      assert.ok(e.message.startsWith(`malformed ${name}: `), e.message);
      counts.refused++;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Inputs: valid messages, raw protobuf built field by field, mutations of both.

// fast-check's records have no prototype; structuredClone makes them the plain objects a decoder returns.
const plain = <T>(arb: fc.Arbitrary<T>) => arb.map((v) => structuredClone(v));

/** Strings that survive UTF-8 (no lone surrogates), some long, some with unicode. */
const text = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }) },
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 100_000 }).map((n) => "x".repeat(n)) },
);
// Any keys, "__proto__" included (fast-check makes it an own key; the decoder keeps it as one).
const annotations = plain(fc.dictionary(fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom("__proto__", "constructor", "toString")), text, { maxKeys: 5 }));

const pullRequest = plain(
  fc.record(
    {
      image: text,
      annotations,
      auth: fc.record({ username: text, password: text, auth: text, serverAddress: text, identityToken: text, registryToken: text }),
      sandbox: fc.record({ name: text, namespace: text, uid: text, labels: annotations, annotations }, { requiredKeys: ["name", "namespace", "uid"] }),
    },
    { requiredKeys: ["image"] },
  ),
);

const criImage = plain(fc.record({ id: text, repoTags: fc.array(text, { maxLength: 4 }), repoDigests: fc.array(text, { maxLength: 4 }) }));

/** Valid encodings of every message the decoders read. */
const validMessage: fc.Arbitrary<Buffer> = fc.oneof(
  text.map((image) => encodeImageStatusRequest(image)),
  fc.tuple(text, annotations).map(([image, a]) => encodeImageStatusRequestFor(image, a)),
  text.map((image) => encodeRemoveImageRequest(image)),
  text.map((ref) => encodePullImageResponse(ref)),
  pullRequest.map((req) => encodePullImageRequest(req)),
  fc.tuple(criImage, annotations).map(([image, info]) => encode(ImageStatusResponse, { image, info })),
  fc.array(criImage, { maxLength: 4 }).map((images) => encode(ListImagesResponse, { images })),
  fc.constantFrom(IMAGE_ABSENT_RESPONSE, LIST_ALL_IMAGES_REQUEST),
);

function varint(value: bigint, overlong = 0): Buffer {
  const out: number[] = [];
  let v = BigInt.asUintN(64, value);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n || overlong > 0) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  for (let i = 0; i < overlong; i++) out.push(i === overlong - 1 ? 0x00 : 0x80);
  return Buffer.from(out);
}

/** One raw field: any field number and wire type, with a payload that may be nested, lie about its length, or stop. */
type RawField = { field: number; wire: number; varint: bigint; overlong: number; payload: Buffer; lie: number };

const rawMessage: fc.Arbitrary<Buffer> = fc.letrec<{ message: Buffer; field: RawField }>((tie) => ({
  field: fc.record({
    field: fc.oneof(fc.integer({ min: 1, max: 8 }), fc.constantFrom(0, 536_870_911, 19_000)),
    wire: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(0, 2, 2, 2) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 7 }) }),
    varint: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
    overlong: fc.oneof({ weight: 8, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 6 }) }),
    payload: fc.oneof(
      { weight: 2, arbitrary: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)) },
      { weight: 2, arbitrary: fc.string({ maxLength: 30 }).map((s) => Buffer.from(s)) },
      { weight: 3, arbitrary: tie("message") },
    ),
    lie: fc.oneof({ weight: 8, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: -5, max: 2 ** 31 }) }),
  }),
  message: fc.array(tie("field"), { maxLength: 5, depthIdentifier: "raw" }).map((fields) =>
    Buffer.concat(
      (fields as RawField[]).map((f) => {
        const key = varint(BigInt(f.field) * 8n + BigInt(f.wire), f.overlong);
        switch (f.wire) {
          case 0:
            return Buffer.concat([key, varint(f.varint, f.overlong)]);
          case 1:
            return Buffer.concat([key, Buffer.alloc(8, 0xab)]);
          case 5:
            return Buffer.concat([key, Buffer.alloc(4, 0xcd)]);
          case 2:
            return Buffer.concat([key, varint(BigInt(Math.max(0, f.payload.length + f.lie))), f.payload]);
          case 3:
            return Buffer.concat([key, f.payload, varint(BigInt(f.field) * 8n + 4n)]);
          default:
            return Buffer.concat([key, f.payload]);
        }
      }),
    ),
  ),
})).message;

type ByteMutation = { op: "flip" | "truncate" | "insert" | "delete"; at: number; bit: number; bytes: Uint8Array; length: number };

const byteMutation: fc.Arbitrary<ByteMutation> = fc.record({
  op: fc.constantFrom("flip" as const, "truncate" as const, "insert" as const, "delete" as const),
  at: fc.nat(),
  bit: fc.integer({ min: 0, max: 7 }),
  bytes: fc.uint8Array({ minLength: 1, maxLength: 6 }),
  length: fc.integer({ min: 1, max: 8 }),
});

function mutateBytes(bytes: Buffer, m: ByteMutation): Buffer {
  if (bytes.length === 0) return Buffer.from(m.bytes);
  const at = m.at % bytes.length;
  if (m.op === "flip") {
    const copy = Buffer.from(bytes);
    copy[at] = copy[at]! ^ (1 << m.bit);
    return copy;
  }
  if (m.op === "truncate") return bytes.subarray(0, at);
  if (m.op === "insert") return Buffer.concat([bytes.subarray(0, at), m.bytes, bytes.subarray(at)]);
  return Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + m.length)]);
}

/** Bytes near valid messages: mutated (several times), concatenated (protobuf merges), raw fields, anything. */
const nearMessage: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 1, arbitrary: validMessage },
  { weight: 4, arbitrary: fc.tuple(validMessage, fc.array(byteMutation, { minLength: 1, maxLength: 3 })).map(([b, ms]) => ms.reduce(mutateBytes, b)) },
  { weight: 2, arbitrary: fc.array(fc.oneof(validMessage, rawMessage), { minLength: 2, maxLength: 3 }).map((parts) => Buffer.concat(parts)) },
  { weight: 3, arbitrary: rawMessage },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 100, max: 20_000 }).map((depth) => {
      // ImageSpec inside ImageStatusRequest inside … thousands deep, as groups (wire type 3) and as length-delimited.
      const groups = Buffer.concat([Buffer.alloc(depth, 0x0b), Buffer.alloc(depth, 0x0c)]);
      let nested = Buffer.alloc(0);
      for (let i = 0; i < Math.min(depth, 2000); i++) nested = Buffer.concat([Buffer.from([0x0a]), varint(BigInt(nested.length)), nested]);
      return depth % 2 === 0 ? groups : nested;
    }),
  },
);

// ---------------------------------------------------------------------------------------------

describe("CRI messages", () => {
  test("valid messages decode as what was encoded (pinned)", () => {
    assert.deepEqual(decodeImageStatusRequest(encodeImageStatusRequestFor("nginx:1", { a: "b" })), { image: { image: "nginx:1", annotations: { a: "b" } } });
    assert.equal(decodeImageStatusResponse(IMAGE_ABSENT_RESPONSE), undefined);
    assert.deepEqual(decodeListImagesResponse(LIST_ALL_IMAGES_REQUEST), []);
    assert.throws(
      () => decodePullImageRequest(Buffer.from([0x0a, 0x05, 0x0a])),
      (e: unknown) => e instanceof CriMessageError && e.code === "malformed-message",
    );
  });

  test("any bytes near valid messages: each decoder gives a well-typed message or a CriMessageError", async () => {
    const counts = { decoded: 0, refused: 0 };
    await checkProperty(
      fc.property(nearMessage, (bytes) => decodeAll(bytes, counts)),
      { file: FILE },
    );
    assert.ok(counts.decoded > 0 && counts.refused > 0, JSON.stringify(counts));
  });

  test("a valid PullImageRequest round-trips: image, annotations, credentials, sandbox", async () => {
    await checkProperty(
      fc.property(pullRequest, (req) => {
        const decoded = decodePullImageRequest(encodePullImageRequest(req));
        assert.deepEqual(decoded.image, { image: req.image, annotations: req.annotations ?? {} });
        // An empty credential encodes as nothing, so it decodes as none: the same anonymous pull.
        if (req.auth && Object.values(req.auth).some((v) => v !== "")) assert.deepEqual(decoded.auth, req.auth);
        if (req.sandbox) {
          const { annotations: sandboxAnnotations, labels, ...metadata } = req.sandbox;
          // The metadata is a message: present, even with every field empty, once it is written.
          assert.deepEqual(decoded.sandbox, { metadata, labels: labels ?? {}, annotations: sandboxAnnotations ?? {} });
        }
      }),
      { file: FILE },
    );
  });

  test("a PullImageRequest sent on for another image differs from the one received in its image only", async () => {
    await checkProperty(
      fc.property(pullRequest, text, (req, image) => {
        const rewritten = decodePullImageRequest(pullImageRequestFor(encodePullImageRequest(req), image));
        assert.deepEqual(rewritten, decodePullImageRequest(encodePullImageRequest({ ...req, image })));
      }),
      { file: FILE },
    );
  });

  test("the other valid messages round-trip", async () => {
    await checkProperty(
      fc.property(text, annotations, criImage, fc.array(criImage, { maxLength: 4 }), (image, a, one, many) => {
        assert.deepEqual(decodeImageStatusRequest(encodeImageStatusRequestFor(image, a)), { image: { image, annotations: a } });
        assert.deepEqual(decodeImageStatusRequest(encodeImageStatusRequest(image)), { image: { image, annotations: {} } });
        assert.deepEqual(decodeRemoveImageRequest(encodeRemoveImageRequest(image)), { image: { image, annotations: {} } });
        assert.deepEqual(decodePullImageResponse(encodePullImageResponse(image)), { imageRef: image });
        // An image without an id is no image (the runtime has none under that name).
        assert.deepEqual(decodeImageStatusResponse(encode(ImageStatusResponse, { image: one, info: a })), one.id === "" ? undefined : one);
        assert.deepEqual(decodeListImagesResponse(encode(ListImagesResponse, { images: many })), many);
      }),
      { file: FILE },
    );
  });
});
