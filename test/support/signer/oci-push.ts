// Test signer: pushes blobs and a manifest (a cosign .sig/.att manifest, a bundle referrer, a referrers tag index)
// to a real registry over the distribution HTTP API, as the signing tools do.
//
// Exists so tests can put real signatures into the test registries (test/support/registry.ts) offline, without
// cosign or skopeo (skopeo cannot push arbitrary artifact manifests). Blobs go up monolithically (POST an upload,
// PUT it with ?digest=); manifests are PUT with their own mediaType as Content-Type. Auth: Basic for htpasswd
// registries; for token registries the Bearer flow (401 challenge → token from the realm with Basic credentials →
// retry). The helper deliberately does not share code with src/registry, the client under test.

import { createHash } from "node:crypto";
import { Agent, request } from "undici";
import type { Dispatcher } from "undici";

export interface PushTarget {
  /** "https://127.0.0.1:PORT" */
  url: string;
  caPem: string;
  username: string;
  password: string;
}

export interface PushArtifact {
  manifest: Buffer;
  mediaType: string;
  blobs: Map<string, Buffer>;
}

/** Pushes every blob, then the manifest at `reference` (a tag or the manifest's digest); returns the manifest digest. */
export async function pushArtifact(registry: PushTarget, repository: string, artifact: PushArtifact, reference: string): Promise<string> {
  const session = new Session(registry, repository);
  try {
    for (const [digest, bytes] of artifact.blobs) await session.pushBlob(digest, bytes);
    return await session.pushManifest(artifact.manifest, artifact.mediaType, reference);
  } finally {
    await session.close();
  }
}

/** GETs a manifest (by tag or digest) as raw bytes with its Content-Type, for reading pushed artifacts back. */
export async function fetchManifest(
  registry: PushTarget,
  repository: string,
  reference: string,
  accept: string[],
): Promise<{ bytes: Buffer; mediaType: string; digest: string }> {
  const session = new Session(registry, repository);
  try {
    const res = await session.send("GET", `/v2/${repository}/manifests/${reference}`, { headers: { accept: accept.join(", ") } });
    if (res.status !== 200) throw new Error(`GET manifest ${repository}:${reference}: HTTP ${res.status}: ${res.body.toString("utf8").slice(0, 300)}`);
    return { bytes: res.body, mediaType: String(res.headers["content-type"] ?? ""), digest: sha256Digest(res.body) };
  } finally {
    await session.close();
  }
}

/** GETs a blob; the registry may redirect to storage, which distribution's filesystem driver does not. */
export async function fetchBlob(registry: PushTarget, repository: string, digest: string): Promise<Buffer> {
  const session = new Session(registry, repository);
  try {
    const res = await session.send("GET", `/v2/${repository}/blobs/${digest}`);
    if (res.status !== 200) throw new Error(`GET blob ${repository}@${digest}: HTTP ${res.status}`);
    if (sha256Digest(res.body) !== digest) throw new Error(`blob ${digest} came back with other content`);
    return res.body;
  } finally {
    await session.close();
  }
}

interface Response {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

class Session {
  private readonly registry: PushTarget;
  private readonly repository: string;
  private readonly agent: Agent;
  private authorization: string | undefined;

  constructor(registry: PushTarget, repository: string) {
    this.registry = registry;
    this.repository = repository;
    this.agent = new Agent({ connect: { ca: registry.caPem } });
  }

  async pushBlob(digest: string, bytes: Buffer): Promise<void> {
    if (sha256Digest(bytes) !== digest) throw new Error(`blob ${digest} does not have that digest`);
    const head = await this.send("HEAD", `/v2/${this.repository}/blobs/${digest}`);
    if (head.status === 200) return;
    const start = await this.send("POST", `/v2/${this.repository}/blobs/uploads/`);
    if (start.status !== 202) throw this.failure("POST blob upload", start);
    const location = header(start, "location");
    if (location === undefined) throw new Error("blob upload: 202 without Location");
    // Location may be relative and already carry query parameters (the upload state).
    const target = new URL(location, this.registry.url);
    target.searchParams.set("digest", digest);
    const put = await this.send("PUT", target.pathname + target.search, {
      body: bytes,
      headers: { "content-type": "application/octet-stream", "content-length": String(bytes.length) },
    });
    if (put.status !== 201) throw this.failure(`PUT blob ${digest}`, put);
  }

  async pushManifest(manifest: Buffer, mediaType: string, reference: string): Promise<string> {
    const digest = sha256Digest(manifest);
    const res = await this.send("PUT", `/v2/${this.repository}/manifests/${reference}`, {
      body: manifest,
      headers: { "content-type": mediaType, "content-length": String(manifest.length) },
    });
    if (res.status !== 201) throw this.failure(`PUT manifest ${this.repository}:${reference}`, res);
    const returned = header(res, "docker-content-digest");
    if (returned !== undefined && returned !== digest) throw new Error(`registry stored the manifest as ${returned}, expected ${digest}`);
    return digest;
  }

  /** One request; on a 401 it answers the challenge once and retries. */
  async send(method: Dispatcher.HttpMethod, path: string, opts: { body?: Buffer; headers?: Record<string, string> } = {}): Promise<Response> {
    let res = await this.raw(method, path, opts);
    if (res.status !== 401) return res;
    const challenge = parseChallenge(header(res, "www-authenticate") ?? "");
    if (challenge?.scheme === "basic") {
      this.authorization = this.basic();
    } else if (challenge?.scheme === "bearer") {
      this.authorization = `Bearer ${await this.token(challenge.params)}`;
    } else {
      return res;
    }
    res = await this.raw(method, path, opts);
    return res;
  }

  private async raw(method: Dispatcher.HttpMethod, path: string, opts: { body?: Buffer; headers?: Record<string, string> }): Promise<Response> {
    const headers: Record<string, string> = { ...opts.headers };
    if (this.authorization !== undefined) headers.authorization = this.authorization;
    const res = await request(new URL(path, this.registry.url), {
      method,
      headers,
      ...(opts.body !== undefined ? { body: opts.body } : {}),
      dispatcher: this.agent,
    });
    const body = method === "HEAD" ? Buffer.alloc(0) : Buffer.from(await res.body.arrayBuffer());
    if (method === "HEAD") await res.body.dump();
    return { status: res.statusCode, headers: res.headers, body };
  }

  private basic(): string {
    return `Basic ${Buffer.from(`${this.registry.username}:${this.registry.password}`).toString("base64")}`;
  }

  /** The Docker token flow: GET realm?service=…&scope=… with Basic credentials. */
  private async token(params: Record<string, string>): Promise<string> {
    const realm = params.realm;
    if (realm === undefined) throw new Error("Bearer challenge without realm");
    const url = new URL(realm);
    if (params.service !== undefined) url.searchParams.set("service", params.service);
    // Ask for push as well as pull: a challenge for a HEAD or GET names pull only, and the token is reused.
    url.searchParams.append("scope", params.scope ?? `repository:${this.repository}:pull,push`);
    if (params.scope !== undefined && !params.scope.includes("push")) url.searchParams.append("scope", `repository:${this.repository}:pull,push`);
    const res = await request(url, { method: "GET", headers: { authorization: this.basic() }, dispatcher: this.agent });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`token request to ${url.origin}${url.pathname}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`);
    const parsed = JSON.parse(text) as { token?: string; access_token?: string };
    const token = parsed.token ?? parsed.access_token;
    if (token === undefined) throw new Error("token response without token");
    return token;
  }

  private failure(what: string, res: Response): Error {
    return new Error(`${what}: HTTP ${res.status}: ${res.body.toString("utf8").slice(0, 500)}`);
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

function header(res: Response, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The first challenge of a WWW-Authenticate header: scheme and quoted or bare parameters. */
function parseChallenge(value: string): { scheme: string; params: Record<string, string> } | undefined {
  const match = /^\s*([A-Za-z]+)\s*(.*)$/s.exec(value);
  if (!match) return undefined;
  const params: Record<string, string> = {};
  for (const param of match[2]!.matchAll(/([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g)) {
    params[param[1]!.toLowerCase()] = param[2] !== undefined ? param[2].replace(/\\(.)/g, "$1") : (param[3] ?? "");
  }
  return { scheme: match[1]!.toLowerCase(), params };
}

function sha256Digest(bytes: Buffer): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}
