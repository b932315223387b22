// An in-process OCI registry with its own token service, for the registry client's unit tests.
//
// Why a fake: these tests need registries that misbehave on purpose (alter a body but keep its digest, lie
// about Content-Length, redirect to other hosts or to plain HTTP, revoke tokens early, never answer) and token
// services whose clock and bookkeeping a test controls. The real docker-registry cannot be made to do any of
// that; the integration tests run the client against it for the well-behaved paths.
import { createHash, randomBytes } from "node:crypto";
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";
import { RegistryClient, type RegistryClientOptions } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";

export interface RecordedRequest {
  method: string;
  /** Path and query as received. */
  url: string;
  authorization: string | undefined;
  /** The Content-Type header, when sent. */
  contentType?: string;
  body: string;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void | Promise<void>;

export interface TestServer {
  host: string; // "127.0.0.1:PORT"
  port: number;
  origin: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export interface TlsFiles {
  caPem: string;
  certPem: string;
  keyPem: string;
  /** A client certificate from a separate CA (clientCaPem), for mutual TLS. */
  clientCaPem: string;
  clientCertPem: string;
  clientKeyPem: string;
}

let tls: Promise<TlsFiles> | undefined;

/** One test CA with a serving certificate for localhost, 127.0.0.1 and ::1, plus a client certificate. */
export function testTls(): Promise<TlsFiles> {
  tls ??= (async () => {
    const ca = await createCertificateAuthority("registry-test-ca");
    const serving = await issueCertificate(ca, { commonName: "registry", dnsNames: ["localhost"], ipAddresses: ["127.0.0.1", "::1"] });
    const clientCa = await createCertificateAuthority("registry-test-client-ca");
    const client = await issueCertificate(clientCa, { commonName: "imprimatur", client: true });
    return {
      caPem: ca.certPem,
      certPem: serving.certPem,
      keyPem: serving.keyPem,
      clientCaPem: clientCa.certPem,
      clientCertPem: client.certPem,
      clientKeyPem: client.keyPem,
    };
  })();
  return tls;
}

/** A server on 127.0.0.1 (HTTPS with the test CA when `https`), recording every request. */
export async function startServer(handler: Handler, options: { https?: boolean; requireClientCert?: boolean } = {}): Promise<TestServer> {
  const requests: RecordedRequest[] = [];
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      requests.push({
        method: req.method ?? "",
        url: req.url ?? "",
        authorization: req.headers.authorization,
        ...(req.headers["content-type"] !== undefined ? { contentType: req.headers["content-type"] } : {}),
        body,
      });
      Promise.resolve(handler(req, res, body)).catch((e: unknown) => {
        res.statusCode = 500;
        res.end(String(e));
      });
    });
  };
  let server: Server;
  if (options.https) {
    const t = await testTls();
    server = createHttpsServer(
      { cert: t.certPem, key: t.keyPem, ...(options.requireClientCert ? { requestCert: true, rejectUnauthorized: true, ca: t.clientCaPem } : {}) },
      listener,
    );
  } else {
    server = createHttpServer(listener);
  }
  await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port: 0 }, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    host: `127.0.0.1:${port}`,
    port,
    origin: `${options.https ? "https" : "http"}://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const sha256 = (data: Buffer | string): string => "sha256:" + createHash("sha256").update(data).digest("hex");
export const sha512 = (data: Buffer | string): string => "sha512:" + createHash("sha512").update(data).digest("hex");

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";

/** A small image manifest whose bytes differ with `seed`. */
export function imageManifest(seed: string): Buffer {
  const config = Buffer.from(`{"architecture":"amd64","os":"linux","seed":${JSON.stringify(seed)}}`);
  return Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: sha256(config), size: config.length },
      layers: [],
    }),
  );
}

export interface User {
  password: string;
  /** Repositories this user may pull; default all. */
  repositories?: string[];
  /** Whether the user may also push to those repositories (blob uploads, manifest PUTs). Default false. */
  push?: boolean;
}

export interface FakeRegistryOptions {
  https?: boolean;
  requireClientCert?: boolean;
  /** none: open; basic: HTTP Basic; bearer: tokens from this server's /token realm. */
  auth?: "none" | "basic" | "bearer";
  users?: Record<string, User>;
  /** Refresh tokens (dockerconfig identitytoken) accepted at POST /token, and whose user they are. */
  refreshTokens?: Record<string, string>;
  /** Repositories anyone may pull, with an anonymous token under bearer auth. */
  publicRepositories?: string[];
  /** The token service's clock (issued_at) and the expires_in it grants. */
  tokenNow?: () => number;
  tokenExpiresIn?: number;
  /** Realm to announce instead of this server's own /token (e.g. another host name for the same server). */
  realm?: (self: TestServer) => string;
  /** Runs first; return true when it answered the request itself (misbehaviour under test). */
  intercept?: (req: IncomingMessage, res: ServerResponse, registry: FakeRegistry) => boolean;
}

interface Grant {
  user: string | undefined;
  repositories: Set<string>;
  /** Repositories the token may push to (its scope asked for pull,push and the user may push). */
  pushRepositories?: Set<string>;
}

/** An OCI registry over one repository namespace: manifests by tag and digest, blobs by digest. */
export class FakeRegistry {
  server!: TestServer;
  readonly options: FakeRegistryOptions;
  readonly manifests = new Map<string, { body: Buffer; mediaType: string; digest: string }>();
  readonly blobs = new Map<string, Buffer>();
  /** Tokens this server issued and still honours. */
  readonly tokens = new Map<string, Grant>();

  private constructor(options: FakeRegistryOptions) {
    this.options = options;
  }

  static async start(options: FakeRegistryOptions = {}): Promise<FakeRegistry> {
    const registry = new FakeRegistry(options);
    registry.server = await startServer((req, res, body) => registry.#handle(req, res, body), {
      https: options.https,
      requireClientCert: options.requireClientCert,
    });
    return registry;
  }

  get host(): string {
    return this.server.host;
  }
  get requests(): RecordedRequest[] {
    return this.server.requests;
  }
  /** Requests other than to the token realm. */
  get registryRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.url.startsWith("/v2/"));
  }
  get tokenRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.url.startsWith("/token"));
  }

  /** Stores a manifest under `tag` (if given) and its digest; returns the digest. */
  putManifest(repository: string, tag: string | undefined, body: Buffer, mediaType = OCI_MANIFEST): string {
    const digest = sha256(body);
    const entry = { body, mediaType, digest };
    this.manifests.set(`${repository}@${digest}`, entry);
    this.manifests.set(`${repository}@${sha512(body)}`, entry);
    if (tag !== undefined) this.manifests.set(`${repository}:${tag}`, entry);
    return digest;
  }

  putBlob(body: Buffer): string {
    const digest = sha256(body);
    this.blobs.set(digest, body);
    return digest;
  }

  revokeTokens(): void {
    this.tokens.clear();
  }

  close(): Promise<void> {
    return this.server.close();
  }

  #realm(): string {
    return this.options.realm ? this.options.realm(this.server) : `${this.server.origin}/token`;
  }

  #challenge(scope?: string): string {
    if (this.options.auth === "basic") return 'Basic realm="fake registry"';
    return `Bearer realm="${this.#realm()}",service="fake-registry"${scope ? `,scope="${scope}"` : ""}`;
  }

  #basicUser(authorization: string | undefined): string | undefined | null {
    if (!authorization?.startsWith("Basic ")) return undefined;
    const [user, ...rest] = Buffer.from(authorization.slice(6), "base64").toString("utf8").split(":");
    const entry = this.options.users?.[user ?? ""];
    return entry && entry.password === rest.join(":") ? (user as string) : null;
  }

  #mayPush(user: string | undefined): boolean {
    return user !== undefined && this.options.users?.[user]?.push === true;
  }

  #mayPull(user: string | undefined, repository: string): boolean {
    if (this.options.publicRepositories?.includes(repository)) return true;
    if (user === undefined) return false;
    const allowed = this.options.users?.[user]?.repositories;
    return allowed === undefined || allowed.includes(repository);
  }

  /** Uploads opened by POST and not yet finished, by id: their repository. */
  readonly uploads = new Map<string, string>();

  #handle(req: IncomingMessage, res: ServerResponse, body: string): void {
    if (this.options.intercept?.(req, res, this)) return;
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname === "/token") return this.#token(req, res, url, body);
    if (url.pathname === "/v2/") {
      if (this.options.auth && this.options.auth !== "none") return deny(res, 401, this.#challenge());
      return json(res, 200, {});
    }
    if (req.method === "POST" || req.method === "PUT") return this.#write(req, res, url, body);
    const match = /^\/v2\/(.+)\/(manifests|blobs)\/([^/]+)$/.exec(url.pathname);
    if (!match) return json(res, 404, { errors: [{ code: "NAME_UNKNOWN", message: "no such route" }] });
    const [, repository, kind, reference] = match as unknown as [string, string, string, string];

    if (!this.#authorized(req, repository)) return deny(res, 401, this.#challenge(`repository:${repository}:pull`));
    if (kind === "manifests") {
      const entry = this.manifests.get(reference.includes(":") ? `${repository}@${reference}` : `${repository}:${reference}`);
      if (!entry) return json(res, 404, { errors: [{ code: "MANIFEST_UNKNOWN", message: "manifest unknown" }] });
      res.writeHead(200, { "content-type": entry.mediaType, "docker-content-digest": entry.digest, "content-length": entry.body.length });
      res.end(req.method === "HEAD" ? undefined : entry.body);
      return;
    }
    const blob = this.blobs.get(reference);
    if (!blob) return json(res, 404, { errors: [{ code: "BLOB_UNKNOWN", message: "blob unknown" }] });
    res.writeHead(200, { "content-type": "application/octet-stream", "docker-content-digest": reference, "content-length": blob.length });
    res.end(blob);
  }

  /** Pushes, as the distribution spec has them: POST opens an upload, PUT ?digest= finishes it, PUT a manifest. */
  #write(req: IncomingMessage, res: ServerResponse, url: URL, body: string): void {
    const upload = /^\/v2\/(.+)\/blobs\/uploads\/([^/]*)$/.exec(url.pathname);
    const manifest = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(url.pathname);
    const repository = upload?.[1] ?? manifest?.[1];
    if (repository === undefined) return json(res, 404, { errors: [{ code: "NAME_UNKNOWN", message: "no such route" }] });
    if (!this.#authorized(req, repository, "push")) return deny(res, 401, this.#challenge(`repository:${repository}:pull,push`));
    if (upload && req.method === "POST" && upload[2] === "") {
      const id = randomBytes(6).toString("hex");
      this.uploads.set(id, repository);
      res.writeHead(202, { location: `/v2/${repository}/blobs/uploads/${id}?_state=opened`, "docker-upload-uuid": id });
      res.end();
      return;
    }
    if (upload && req.method === "PUT" && this.uploads.get(upload[2]!) === repository) {
      const digest = url.searchParams.get("digest");
      const bytes = Buffer.from(body, "utf8");
      if (digest !== sha256(bytes)) return json(res, 400, { errors: [{ code: "DIGEST_INVALID", message: "provided digest did not match uploaded content" }] });
      this.uploads.delete(upload[2]!);
      this.blobs.set(digest, bytes);
      res.writeHead(201, { location: `/v2/${repository}/blobs/${digest}`, "docker-content-digest": digest });
      res.end();
      return;
    }
    if (manifest && req.method === "PUT") {
      const digest = this.putManifest(repository, manifest[2]!.includes(":") ? undefined : manifest[2], Buffer.from(body, "utf8"), req.headers["content-type"]);
      res.writeHead(201, { location: `/v2/${repository}/manifests/${digest}`, "docker-content-digest": digest });
      res.end();
      return;
    }
    json(res, 404, { errors: [{ code: "BLOB_UPLOAD_UNKNOWN", message: "blob upload unknown" }] });
  }

  #authorized(req: IncomingMessage, repository: string, access: "pull" | "push" = "pull"): boolean {
    const auth = this.options.auth ?? "none";
    if (auth === "none") return true;
    const header = req.headers.authorization;
    if (auth === "basic") {
      const user = this.#basicUser(header);
      return user !== null && this.#mayPull(user, repository) && (access === "pull" || this.#mayPush(user));
    }
    if (!header?.startsWith("Bearer ")) return false;
    const grant = this.tokens.get(header.slice(7));
    return (access === "pull" ? grant?.repositories : grant?.pushRepositories)?.has(repository) ?? false;
  }

  #token(req: IncomingMessage, res: ServerResponse, url: URL, body: string): void {
    let user: string | undefined;
    let scope: string | null;
    if (req.method === "POST") {
      const form = new URLSearchParams(body);
      if (form.get("grant_type") !== "refresh_token" || form.get("client_id") !== "imprimatur") return json(res, 400, { error: "unsupported_grant_type" });
      user = this.options.refreshTokens?.[form.get("refresh_token") ?? ""];
      if (user === undefined) return json(res, 401, { error: "invalid_grant" });
      scope = form.get("scope");
    } else {
      const basic = this.#basicUser(req.headers.authorization);
      if (basic === null) return json(res, 401, { details: "incorrect username or password" });
      user = basic;
      scope = url.searchParams.get("scope");
    }
    // As real token services do: a valid caller gets a token, carrying only the access it is entitled to.
    const repositories = new Set<string>();
    const pushRepositories = new Set<string>();
    const [, repository, actions] = /^repository:(.+):(pull|pull,push)$/.exec(scope ?? "") ?? [];
    if (repository !== undefined && this.#mayPull(user, repository)) {
      repositories.add(repository);
      if (actions === "pull,push" && this.#mayPush(user)) pushRepositories.add(repository);
    }
    const token = randomBytes(12).toString("hex");
    this.tokens.set(token, { user, repositories, pushRepositories });
    const issued = new Date((this.options.tokenNow ?? Date.now)()).toISOString();
    json(res, 200, { token, ...(this.options.tokenExpiresIn !== undefined ? { expires_in: this.options.tokenExpiresIn } : {}), issued_at: issued });
  }
}

export function json(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function deny(res: ServerResponse, status: number, challenge: string): void {
  res.setHeader("www-authenticate", challenge);
  json(res, status, { errors: [{ code: "UNAUTHORIZED", message: "authentication required" }] });
}

/** A client that asks `mirror` before `origin` (both over TLS with the test CA); the test's end closes all three. */
export async function clientThroughMirror(
  t: TestContext,
  origin: FakeRegistry,
  mirror: FakeRegistry,
  options: Omit<RegistryClientOptions, "settings"> = {},
): Promise<RegistryClient> {
  const { caPem } = await testTls();
  const client = new RegistryClient({
    settings: registrySettingsMap([
      { host: origin.host, ca: caPem, allowLocalAddresses: true, mirrors: [mirror.host] },
      { host: mirror.host, ca: caPem, allowLocalAddresses: true },
    ]),
    ...options,
  });
  t.after(async () => {
    await client.close();
    await origin.close();
    await mirror.close();
  });
  return client;
}
