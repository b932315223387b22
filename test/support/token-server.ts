// The tests' own registry token server (Docker/distribution "token authentication"), in-process on 127.0.0.1.
//
// Flow: the registry answers 401 with `WWW-Authenticate: Bearer realm=…,service=…,scope=…`; the client asks the
// realm for a token (GET with optional Basic auth, or the OAuth2 POST form) and retries with `Bearer <token>`.
// The token is a JWT signed ES256 whose header carries an `x5c` chain: a signing certificate issued by the test
// CA, then the CA. docker-registry 2.8 verifies that chain against its `rootcertbundle` (the CA), takes the key
// from the leaf and checks iss = its configured issuer, aud = its service, exp/nbf (60 s leeway) and that the
// `access` claim holds every action the request needs.
//
// Access rules: an authenticated user may pull the repositories matching its `pull` globs (default: all) and,
// with `push` (default true), push them too; anonymous requests may only pull `publicRepositories`. What is not
// allowed is left out of the token (not refused), as registries' token servers do; the registry then answers 401.

import { randomBytes, sign, timingSafeEqual, X509Certificate } from "node:crypto";
import { createServer } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { recordPrivateKey, recordSecret } from "./secret-ledger.ts";

export interface TokenServerUser {
  username: string;
  password: string;
  /** Repository globs this user may pull: `*` matches within one path segment, `**` across segments. Default ["**"]. */
  pull?: string[];
  /** May push (and pull) the repositories it may pull. Default true. */
  push?: boolean;
}

export interface TokenServerOptions {
  /** The CA that issues the server's serving certificate and its token signing certificate. */
  ca: { certPem: string; keyPem: string };
  /** The registry's `auth.token.service`; tokens carry it as `aud`. */
  service: string;
  /** The registry's `auth.token.issuer`; tokens carry it as `iss`. */
  issuer: string;
  users: TokenServerUser[];
  /** Repository globs anyone may pull without credentials. */
  publicRepositories?: string[];
  /** Lifetime of issued access tokens. Default 300. */
  tokenTtlSeconds?: number;
}

export interface ResourceAccess {
  type: string;
  name: string;
  actions: string[];
}

/** One request to the token endpoint, without any secret. */
export interface TokenRequestRecord {
  method: string;
  grant: "basic" | "anonymous" | "password" | "refresh_token";
  username?: string;
  scopes: string[];
  status: number;
  granted: ResourceAccess[];
}

export interface TokenServerCounters {
  requests: number;
  /** Requests presenting credentials: Basic auth, a password grant or a refresh token. */
  withCredentials: number;
  anonymous: number;
  /** Requests refused (wrong credentials, unknown refresh token, bad request). */
  rejected: number;
  /** Access tokens issued. */
  issued: number;
  refreshTokensIssued: number;
}

export interface TestTokenServer {
  /** https://127.0.0.1:PORT */
  url: string;
  /** The token endpoint, the registry's `auth.token.realm`. */
  realm: string;
  service: string;
  issuer: string;
  counters: TokenServerCounters;
  requests: TokenRequestRecord[];
  /** Signs a token directly (e.g. to test an expired token: a negative `expiresInSeconds`). */
  signToken(subject: string, access: ResourceAccess[], opts?: { expiresInSeconds?: number; audience?: string }): string;
  stop(): Promise<void>;
}

const DEFAULT_TTL_SECONDS = 300;
const TOKEN_PATH = "/token";
const BASIC_REALM = "imprimatur-test-token-server";

export async function startTokenServer(opts: TokenServerOptions): Promise<TestTokenServer> {
  const serving = await issueCertificate(opts.ca, {
    commonName: "imprimatur-test-token-server",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1", "::1"],
  });
  // The signing certificate needs no SAN: the registry only checks that it chains to its rootcertbundle.
  const signer = await issueCertificate(opts.ca, { commonName: "imprimatur-test-token-signer" });
  recordPrivateKey(serving.keyPem, "the token server's TLS key");
  recordPrivateKey(signer.keyPem, "the token server's signing key");
  const x5c = [signer.certPem, opts.ca.certPem].map((pem) => new X509Certificate(pem).raw.toString("base64"));
  const ttl = opts.tokenTtlSeconds ?? DEFAULT_TTL_SECONDS;

  const counters: TokenServerCounters = { requests: 0, withCredentials: 0, anonymous: 0, rejected: 0, issued: 0, refreshTokensIssued: 0 };
  const requests: TokenRequestRecord[] = [];
  const refreshTokens = new Map<string, string>(); // refresh token → username

  const signToken: TestTokenServer["signToken"] = (subject, access, tokenOpts = {}) => {
    const now = Math.floor(Date.now() / 1000);
    const header = { typ: "JWT", alg: "ES256", x5c };
    const claims = {
      iss: opts.issuer,
      sub: subject,
      aud: tokenOpts.audience ?? opts.service,
      exp: now + (tokenOpts.expiresInSeconds ?? ttl),
      nbf: now,
      iat: now,
      jti: randomBytes(12).toString("hex"),
      access,
    };
    const signingInput = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
    // JOSE ES256 wants the raw r||s signature, not DER.
    const signature = sign("sha256", Buffer.from(signingInput), { key: signer.keyPem, dsaEncoding: "ieee-p1363" });
    const token = `${signingInput}.${base64url(signature)}`;
    recordSecret("a registry bearer token", token);
    return token;
  };

  const issue = (username: string | undefined, scopes: string[]) => {
    const granted = grantAccess(
      parseScopes(scopes),
      username === undefined ? undefined : opts.users.find((u) => u.username === username),
      opts.publicRepositories ?? [],
    );
    counters.issued++;
    return { token: signToken(username ?? "", granted), granted };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, record: TokenRequestRecord): Promise<void> => {
    const url = new URL(req.url ?? "/", "https://127.0.0.1");
    if (url.pathname !== TOKEN_PATH) return reply(res, record, 404, { error: "not_found", details: `the token endpoint is ${TOKEN_PATH}` });

    if (req.method === "GET") {
      record.scopes = url.searchParams
        .getAll("scope")
        .flatMap((s) => s.split(" "))
        .filter(Boolean);
      const service = url.searchParams.get("service");
      if (service !== null && service !== opts.service)
        return reply(res, record, 400, { error: "invalid_request", details: `unknown service ${JSON.stringify(service)}` });
      const basic = parseBasicAuth(req.headers.authorization);
      let username: string | undefined;
      if (basic === null) {
        record.grant = "anonymous";
      } else {
        record.grant = "basic";
        record.username = basic.username;
        if (!checkPassword(opts.users, basic.username, basic.password)) {
          res.setHeader("www-authenticate", `Basic realm="${BASIC_REALM}"`);
          return reply(res, record, 401, { error: "unauthorized", details: "wrong username or password" });
        }
        username = basic.username;
      }
      const { token, granted } = issue(username, record.scopes);
      record.granted = granted;
      const body: Record<string, unknown> = { token, access_token: token, expires_in: ttl, issued_at: new Date().toISOString() };
      if (username !== undefined && url.searchParams.get("offline_token") === "true") body.refresh_token = newRefreshToken(username);
      return reply(res, record, 200, body);
    }

    if (req.method === "POST") {
      const form = new URLSearchParams(await readBody(req));
      record.scopes = (form.get("scope") ?? "").split(" ").filter(Boolean);
      const service = form.get("service");
      if (service !== null && service !== opts.service)
        return reply(res, record, 400, { error: "invalid_request", details: `unknown service ${JSON.stringify(service)}` });
      const grantType = form.get("grant_type");
      let username: string;
      // OAuth2 (RFC 6749 §5.2) reports bad credentials and unknown refresh tokens as 400 invalid_grant.
      if (grantType === "password") {
        record.grant = "password";
        username = form.get("username") ?? "";
        record.username = username;
        if (!checkPassword(opts.users, username, form.get("password") ?? ""))
          return reply(res, record, 400, { error: "invalid_grant", details: "wrong username or password" });
      } else if (grantType === "refresh_token") {
        record.grant = "refresh_token";
        const known = refreshTokens.get(form.get("refresh_token") ?? "");
        if (known === undefined) return reply(res, record, 400, { error: "invalid_grant", details: "unknown refresh token" });
        username = known;
        record.username = username;
      } else {
        return reply(res, record, 400, { error: "unsupported_grant_type", details: "grant_type must be password or refresh_token" });
      }
      const { token, granted } = issue(username, record.scopes);
      record.granted = granted;
      const body: Record<string, unknown> = {
        access_token: token,
        token,
        scope: record.scopes.join(" "),
        expires_in: ttl,
        issued_at: new Date().toISOString(),
      };
      if (grantType === "password" && form.get("access_type") === "offline") body.refresh_token = newRefreshToken(username);
      return reply(res, record, 200, body);
    }

    res.setHeader("allow", "GET, POST");
    return reply(res, record, 405, { error: "method_not_allowed" });
  };

  const newRefreshToken = (username: string): string => {
    const token = randomBytes(24).toString("hex");
    recordSecret("a registry refresh token", token);
    refreshTokens.set(token, username);
    counters.refreshTokensIssued++;
    return token;
  };

  const reply = (res: ServerResponse, record: TokenRequestRecord, status: number, body: unknown): void => {
    record.status = status;
    if (record.grant === "anonymous") counters.anonymous++;
    else counters.withCredentials++;
    if (status >= 400) counters.rejected++;
    res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
    res.end(JSON.stringify(body));
  };

  const server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    counters.requests++;
    const record: TokenRequestRecord = { method: req.method ?? "", grant: "anonymous", scopes: [], status: 0, granted: [] };
    requests.push(record);
    handle(req, res, record).catch((err: Error) => {
      if (!res.headersSent) reply(res, record, 500, { error: "internal", details: err.message });
      else res.destroy(err);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0 }, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `https://127.0.0.1:${port}`;

  let stopping: Promise<void> | undefined;
  return {
    url,
    realm: `${url}${TOKEN_PATH}`,
    service: opts.service,
    issuer: opts.issuer,
    counters,
    requests,
    signToken,
    stop: () => {
      stopping ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopping;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Pure helpers

export interface ParsedScope {
  type: string;
  name: string;
  actions: string[];
}

/**
 * `type:name:actions` scopes (the name may itself contain ':' — a registry host with a port — so the type ends
 * at the first ':' and the actions start after the last). Malformed scopes are ignored.
 */
export function parseScopes(scopes: string[]): ParsedScope[] {
  const parsed: ParsedScope[] = [];
  for (const scope of scopes) {
    const first = scope.indexOf(":");
    const last = scope.lastIndexOf(":");
    if (first <= 0 || last === first) continue;
    const actions = scope
      .slice(last + 1)
      .split(",")
      .filter(Boolean);
    parsed.push({ type: scope.slice(0, first), name: scope.slice(first + 1, last), actions });
  }
  return parsed;
}

/** The requested actions this caller may have; unknown users and non-repository resources get nothing. */
export function grantAccess(requested: ParsedScope[], user: TokenServerUser | undefined, publicRepositories: string[]): ResourceAccess[] {
  const byResource = new Map<string, ResourceAccess>();
  for (const scope of requested) {
    if (scope.type !== "repository") continue;
    const allowed = new Set<string>();
    if (user !== undefined) {
      if ((user.pull ?? ["**"]).some((glob) => matchesGlob(glob, scope.name))) {
        allowed.add("pull");
        if (user.push ?? true) allowed.add("push");
      }
    }
    if (publicRepositories.some((glob) => matchesGlob(glob, scope.name))) allowed.add("pull");
    const actions = scope.actions.filter((a) => allowed.has(a));
    if (actions.length === 0) continue;
    const key = `${scope.type}:${scope.name}`;
    const entry = byResource.get(key) ?? { type: scope.type, name: scope.name, actions: [] };
    for (const action of actions) if (!entry.actions.includes(action)) entry.actions.push(action);
    byResource.set(key, entry);
  }
  return [...byResource.values()];
}

/** `*` matches within one path segment, `**` across segments; everything else literally. */
export function matchesGlob(glob: string, name: string): boolean {
  let pattern = "";
  for (let i = 0; i < glob.length; i++) {
    const char = glob[i]!;
    if (char === "*" && glob[i + 1] === "*") {
      pattern += ".*";
      i++;
    } else if (char === "*") {
      pattern += "[^/]*";
    } else {
      pattern += char.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
    }
  }
  return new RegExp(`^${pattern}$`).test(name);
}

function parseBasicAuth(header: string | undefined): { username: string; password: string } | null {
  if (header === undefined) return null;
  const [scheme, value] = header.split(" ", 2);
  if (scheme?.toLowerCase() !== "basic" || value === undefined) return null;
  const decoded = Buffer.from(value, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

function checkPassword(users: TokenServerUser[], username: string, password: string): boolean {
  const user = users.find((u) => u.username === username);
  if (user === undefined) return false;
  const want = Buffer.from(user.password);
  const got = Buffer.from(password);
  return want.length === got.length && timingSafeEqual(want, got);
}

function base64url(data: string | Buffer): string {
  return Buffer.from(data).toString("base64url");
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}
