// Reading and writing the few CRI image-service messages the node proxy looks into, with protobufjs over the
// project's own image-service.proto. Requests and responses it does not change are forwarded as received.
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import type { RegistryAuth } from "../core/pull-verification/credential-hash.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

const root = protobuf.loadSync(fileURLToPath(new URL("./image-service.proto", import.meta.url)));
const type = (name: string) => root.lookupType(`imprimatur.cri.${name}`);
const ImageStatusRequest = type("ImageStatusRequest");
const ImageStatusResponse = type("ImageStatusResponse");
const PullImageRequest = type("PullImageRequest");
const PullImageResponse = type("PullImageResponse");
const RemoveImageRequest = type("RemoveImageRequest");
const ListImagesRequest = type("ListImagesRequest");
const ListImagesResponse = type("ListImagesResponse");

/** A message that is not valid protobuf for its type. */
export class CriMessageError extends ImprimaturError<"malformed-message"> {
  constructor(what: string, cause: unknown) {
    super("malformed-message", `malformed ${what}: ${(cause as Error).message}`, { cause });
  }
}

export interface ImageSpec {
  image: string;
  annotations: Record<string, string>;
}

export interface SandboxMetadata {
  name: string;
  uid: string;
  namespace: string;
}

export interface PullImageRequest {
  image: ImageSpec;
  auth: RegistryAuth | undefined;
  sandbox: { metadata: SandboxMetadata | undefined; labels: Record<string, string>; annotations: Record<string, string> } | undefined;
}

export interface CriImage {
  id: string;
  repoTags: string[];
  repoDigests: string[];
}

const OBJECT_OPTIONS = { defaults: true, arrays: true, objects: true } as const;

function decode<T>(t: protobuf.Type, bytes: Uint8Array, what: string): T {
  try {
    return t.toObject(t.decode(bytes), OBJECT_OPTIONS) as T;
  } catch (e) {
    throw new CriMessageError(what, e);
  }
}

function imageSpec(raw: { image?: string; annotations?: Record<string, string> } | null | undefined): ImageSpec {
  return { image: raw?.image ?? "", annotations: raw?.annotations ?? {} };
}

export function decodeImageStatusRequest(bytes: Uint8Array): { image: ImageSpec } {
  const raw = decode<{ image?: ImageSpec }>(ImageStatusRequest, bytes, "ImageStatusRequest");
  return { image: imageSpec(raw.image) };
}

export function encodeImageStatusRequest(image: string): Buffer {
  return Buffer.from(ImageStatusRequest.encode(ImageStatusRequest.fromObject({ image: { image } })).finish());
}

/** The image the runtime has under that name, or undefined when it has none. */
export function decodeImageStatusResponse(bytes: Uint8Array): CriImage | undefined {
  const raw = decode<{ image?: CriImage | null }>(ImageStatusResponse, bytes, "ImageStatusResponse");
  return raw.image && raw.image.id ? { id: raw.image.id, repoTags: raw.image.repoTags, repoDigests: raw.image.repoDigests } : undefined;
}

/** "No such image": an ImageStatusResponse without an image, which is an empty message. */
export const IMAGE_ABSENT_RESPONSE: Buffer = Buffer.alloc(0);

export function decodePullImageRequest(bytes: Uint8Array): PullImageRequest {
  const raw = decode<{
    image?: ImageSpec;
    auth?: RegistryAuth | null;
    sandboxConfig?: { metadata?: SandboxMetadata | null; labels?: Record<string, string>; annotations?: Record<string, string> } | null;
  }>(PullImageRequest, bytes, "PullImageRequest");
  return {
    image: imageSpec(raw.image),
    auth: raw.auth ?? undefined,
    sandbox: raw.sandboxConfig
      ? {
          metadata: raw.sandboxConfig.metadata
            ? { name: raw.sandboxConfig.metadata.name, uid: raw.sandboxConfig.metadata.uid, namespace: raw.sandboxConfig.metadata.namespace }
            : undefined,
          labels: raw.sandboxConfig.labels ?? {},
          annotations: raw.sandboxConfig.annotations ?? {},
        }
      : undefined,
  };
}

/**
 * The same PullImageRequest naming another image: only ImageSpec.image is replaced. Every other field, of the
 * request and of its ImageSpec, is copied as the bytes received, including fields this project does not declare
 * (the sandbox's Linux settings, the kubelet's user_specified_image and runtime_handler).
 */
export function pullImageRequestFor(bytes: Uint8Array, image: string): Buffer {
  try {
    const fields = fieldsOf(bytes);
    const spec = fields.find((f) => f.number === IMAGE_SPEC_FIELD);
    const specBytes = spec ? bytes.subarray(spec.valueStart, spec.end) : new Uint8Array(0);
    const keptOfSpec = fieldsOf(specBytes)
      .filter((f) => f.number !== IMAGE_NAME_FIELD)
      .map((f) => specBytes.subarray(f.start, f.end));
    const newSpec = Buffer.concat([lengthDelimited(IMAGE_NAME_FIELD, Buffer.from(image, "utf8")), ...keptOfSpec]);
    const rest = fields.filter((f) => f.number !== IMAGE_SPEC_FIELD).map((f) => bytes.subarray(f.start, f.end));
    return Buffer.concat([lengthDelimited(IMAGE_SPEC_FIELD, newSpec), ...rest]);
  } catch (e) {
    throw new CriMessageError("PullImageRequest", e);
  }
}

/** PullImageRequest.image and ImageSpec.image. */
const IMAGE_SPEC_FIELD = 1;
const IMAGE_NAME_FIELD = 1;
const LENGTH_DELIMITED = 2;

/** A top-level field of an encoded message: its number, where it starts (tag included), its value and its end. */
interface WireField {
  number: number;
  start: number;
  valueStart: number;
  end: number;
}

// protobufjs drops fields a message type does not declare when it decodes; walking the wire format keeps them.
function fieldsOf(bytes: Uint8Array): WireField[] {
  const reader = protobuf.Reader.create(bytes);
  const fields: WireField[] = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const tag = reader.uint32();
    const number = tag >>> 3;
    const wireType = tag & 7;
    let valueStart = reader.pos;
    if (wireType === LENGTH_DELIMITED) {
      const length = reader.uint32();
      valueStart = reader.pos;
      reader.skip(length);
    } else reader.skipType(wireType);
    fields.push({ number, start, valueStart, end: reader.pos });
  }
  return fields;
}

function lengthDelimited(field: number, value: Uint8Array): Buffer {
  const writer = protobuf.Writer.create();
  writer.uint32((field << 3) | LENGTH_DELIMITED).bytes(value);
  return Buffer.from(writer.finish());
}

export function decodePullImageResponse(bytes: Uint8Array): { imageRef: string } {
  return { imageRef: decode<{ imageRef: string }>(PullImageResponse, bytes, "PullImageResponse").imageRef };
}

export function encodePullImageResponse(imageRef: string): Buffer {
  return Buffer.from(PullImageResponse.encode(PullImageResponse.fromObject({ imageRef })).finish());
}

export function decodeRemoveImageRequest(bytes: Uint8Array): { image: ImageSpec } {
  return { image: imageSpec(decode<{ image?: ImageSpec }>(RemoveImageRequest, bytes, "RemoveImageRequest").image) };
}

/** For tests: a RemoveImageRequest. */
export function encodeRemoveImageRequest(image: string): Buffer {
  return Buffer.from(RemoveImageRequest.encode(RemoveImageRequest.fromObject({ image: { image } })).finish());
}

export const LIST_ALL_IMAGES_REQUEST: Buffer = Buffer.from(ListImagesRequest.encode(ListImagesRequest.fromObject({})).finish());

export function decodeListImagesResponse(bytes: Uint8Array): CriImage[] {
  return decode<{ images: CriImage[] }>(ListImagesResponse, bytes, "ListImagesResponse").images.map((i) => ({
    id: i.id,
    repoTags: i.repoTags,
    repoDigests: i.repoDigests,
  }));
}

/** For tests and benchmarks that speak CRI themselves. */
export function encodePullImageRequest(req: {
  image: string;
  annotations?: Record<string, string>;
  auth?: Partial<RegistryAuth>;
  sandbox?: { name: string; namespace: string; uid: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}): Buffer {
  return Buffer.from(
    PullImageRequest.encode(
      PullImageRequest.fromObject({
        image: { image: req.image, annotations: req.annotations ?? {} },
        ...(req.auth ? { auth: req.auth } : {}),
        ...(req.sandbox
          ? {
              sandboxConfig: {
                metadata: { name: req.sandbox.name, namespace: req.sandbox.namespace, uid: req.sandbox.uid },
                labels: req.sandbox.labels ?? {},
                annotations: req.sandbox.annotations ?? {},
              },
            }
          : {}),
      }),
    ).finish(),
  );
}

/** For tests: an ImageStatusRequest carrying a pod's annotations, as the kubelet's pull decision sends it. */
export function encodeImageStatusRequestFor(image: string, annotations: Record<string, string>): Buffer {
  return Buffer.from(ImageStatusRequest.encode(ImageStatusRequest.fromObject({ image: { image, annotations } })).finish());
}
