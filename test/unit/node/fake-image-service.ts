// An in-process fake of the runtime's CRI image service and its registries, for unit tests of the node proxy's
// decisions (NodeImageProxy). It speaks the real message bytes (the project's image-service.proto), so the proxy
// code under test is the code that runs; what is faked is containerd and the registry behind it. The real
// runtime and registry are tested end to end in test/e2e/node-proxy-cri.test.ts and node-proxy-kubelet*.test.ts.
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import { fullName, parseImageReference, repositoryName } from "../../../src/core/image-reference.ts";
import type { CriPackage, ImageCall, ImageMethod, RuntimeImageClient } from "../../../src/cri/image-service-proxy.ts";

const root = protobuf.loadSync(fileURLToPath(new URL("../../../src/cri/image-service.proto", import.meta.url)));
const type = (name: string) => root.lookupType(`imprimatur.cri.${name}`);
const encode = (name: string, value: object): Buffer => {
  const t = type(name);
  return Buffer.from(t.encode(t.fromObject(value)).finish());
};
const decode = (name: string, bytes: Buffer): any => {
  const t = type(name);
  return t.toObject(t.decode(bytes), { defaults: true, arrays: true, objects: true });
};

export interface Credential {
  username: string;
  password: string;
}

/** A gRPC-style failure, as the runtime client rejects. */
export class FakeCriError extends Error {
  readonly code: number;
  readonly details: string;
  constructor(code: number, details: string) {
    super(details);
    this.code = code;
    this.details = details;
  }
}

export class FakeImageService {
  /** Registry side: full name (with tag) → image id; repository → the credential it requires (none: public). */
  private readonly remote = new Map<string, string>();
  private readonly protectedRepos = new Map<string, Credential>();
  /** Runtime side: image id → the names it has locally. */
  private readonly local = new Map<string, Set<string>>();
  /** Every call forwarded to the runtime by the proxy for the kubelet (not the proxy's own calls). */
  readonly forwarded: Array<{ method: ImageMethod; image?: string }> = [];
  /** PullImage calls that reached the registry. */
  registryPulls = 0;

  /** Publishes `image` (name:tag) as `id`; with `credential`, its repository requires it. */
  publish(image: string, id: string, credential?: Credential): void {
    this.remote.set(canonical(image), id);
    if (credential) this.protectedRepos.set(repository(image), credential);
  }

  /** Puts an image on the node without the proxy (preloaded, or imported). */
  preload(image: string, id: string): void {
    const names = this.local.get(id) ?? new Set<string>();
    names.add(canonical(image));
    this.local.set(id, names);
  }

  /** Gives a local image a name as the runtime may list it, unparsed (an import can leave names that are no reference). */
  addRawName(id: string, name: string): void {
    this.local.get(id)?.add(name);
  }

  delete(id: string): void {
    this.local.delete(id);
  }

  /** The runtime client the proxy uses for its own calls. */
  readonly runtime = {
    call: async (_pkg: CriPackage, method: ImageMethod, request: Buffer): Promise<Buffer> => this.answer(method, request),
    close: () => {},
  } as unknown as RuntimeImageClient;

  /** A call as the proxy server hands it to the handler. */
  call(method: ImageMethod, request: Buffer, signal = new AbortController().signal): ImageCall {
    return {
      pkg: "runtime.v1",
      method,
      request,
      signal,
      forward: async (req?: Buffer) => {
        const bytes = req ?? request;
        this.forwarded.push({
          method,
          ...(method === "ListImages" || method === "ImageFsInfo" ? {} : { image: decode(`${method}Request`, bytes).image?.image }),
        });
        return this.answer(method, bytes);
      },
    };
  }

  private async answer(method: ImageMethod, request: Buffer): Promise<Buffer> {
    switch (method) {
      case "ImageStatus": {
        const id = this.find(decode("ImageStatusRequest", request).image?.image ?? "");
        return id ? encode("ImageStatusResponse", { image: this.image(id) }) : Buffer.alloc(0);
      }
      case "ListImages":
        return encode("ListImagesResponse", { images: [...this.local.keys()].map((id) => this.image(id)) });
      case "RemoveImage": {
        const id = this.find(decode("RemoveImageRequest", request).image?.image ?? "");
        if (id) this.local.delete(id);
        return Buffer.alloc(0);
      }
      case "PullImage": {
        const req = decode("PullImageRequest", request);
        const image: string = req.image?.image ?? "";
        this.registryPulls++;
        const required = this.protectedRepos.get(repository(image));
        if (required && (req.auth?.username !== required.username || req.auth?.password !== required.password))
          throw new FakeCriError(2, `failed to pull ${image}: 401 Unauthorized`);
        const id = this.remote.get(canonical(image));
        if (!id) throw new FakeCriError(2, `failed to pull ${image}: not found`);
        this.preload(image, id);
        return encode("PullImageResponse", { imageRef: id });
      }
      default:
        return Buffer.alloc(0);
    }
  }

  private find(nameOrId: string): string | undefined {
    if (this.local.has(nameOrId)) return nameOrId;
    const parsed = parseImageReference(nameOrId);
    if (!parsed.ok) return undefined;
    const wanted = fullName(parsed.ref);
    for (const [id, names] of this.local) if (names.has(wanted)) return id;
    return undefined;
  }

  private image(id: string): object {
    return { id, repoTags: [...(this.local.get(id) ?? [])], repoDigests: [] };
  }
}

function canonical(image: string): string {
  const parsed = parseImageReference(image);
  if (!parsed.ok) throw new Error(parsed.error);
  return fullName(parsed.ref);
}

function repository(image: string): string {
  const parsed = parseImageReference(image);
  return parsed.ok ? repositoryName(parsed.ref) : image;
}
