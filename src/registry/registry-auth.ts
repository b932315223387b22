// How requests to one registry endpoint get authorized: the endpoint's scheme (learned by pinging /v2/ once,
// and corrected by later challenges), and for Bearer the token from the realm, cached per credential.
//
// Token requests (Docker token spec; OAuth2 for identity tokens):
// - username/password or anonymous: GET realm?service=…&scope=…, with Basic auth when there is a password;
// - identityToken (a refresh token): POST realm, form grant_type=refresh_token, service, scope, client_id,
//   refresh_token;
// - registryToken: no request, sent as the Bearer token.
// The realm is named by the registry, so it only ever sees the credential chosen for that registry endpoint,
// and only over HTTPS (the transport refuses plain HTTP to hosts not listed insecure).
import { parseAuthChallenges, chooseEndpointAuth, type EndpointAuth } from "./auth-challenge.ts";
import type { RegistryCredential } from "../credentials/credential.ts";
import { header, subject, type ExchangeContext, type HttpResponse, type HttpTransport } from "./http-exchange.ts";
import { RegistryError } from "./registry-error.ts";
import { hostOf, settingsForHost, type RegistryEndpoint, type RegistrySettingsMap } from "./registry-settings.ts";
import { InFlight } from "./in-flight.ts";
import { credentialIdentity, tokenKeyId, type TokenCache, type TokenGrant, type TokenKey } from "./token-cache.ts";

/** Sent as OAuth2 client_id when exchanging an identity token. */
const OAUTH_CLIENT_ID = "imprimatur";
const TOKEN_RESPONSE_LIMIT = 1024 * 1024;
/** Pinged endpoints remembered; image references can name any host, so the memory is bounded. */
const MAX_REMEMBERED_ENDPOINTS = 1000;

export type Authorization =
  /** The header to send (undefined: send none), and the cached token it came from, if any. */
  | { ok: true; header?: string; cached?: { key: TokenKey; token: string } }
  /** The credential cannot be used here or was refused by the token service; try the next one. */
  | { ok: false; reason: string };

export type RepositoryActions = "pull" | "pull,push";

export interface AuthorizeRequest {
  endpoint: RegistryEndpoint;
  auth: EndpointAuth;
  credential: RegistryCredential | undefined;
  repository: string;
  /** What the token must allow: pulling (every read) or pulling and pushing (`imprimatur install`'s image push). */
  actions?: RepositoryActions;
  /** Skip the token cache (the cached token was just refused). */
  fresh?: boolean;
  signal?: AbortSignal;
  context: ExchangeContext;
}

export class RegistryAuthorizer {
  readonly #transport: HttpTransport;
  readonly #settings: RegistrySettingsMap;
  readonly #tokens: TokenCache;
  readonly #pings = new Map<string, EndpointAuth>();
  readonly #pinging = new InFlight<EndpointAuth>();
  readonly #fetching = new InFlight<TokenGrant | { refused: string }>();

  constructor(transport: HttpTransport, settings: RegistrySettingsMap, tokens: TokenCache) {
    this.#transport = transport;
    this.#settings = settings;
    this.#tokens = tokens;
  }

  /** The endpoint's auth scheme: from the ping cache, or GET /v2/ once. */
  async endpointAuth(endpoint: RegistryEndpoint, context: ExchangeContext, signal?: AbortSignal): Promise<EndpointAuth> {
    const known = this.#pings.get(endpoint.origin);
    if (known) return known;
    // Shared per repository too, so that an error names the repository its caller asked about.
    return this.#pinging.run(
      `${endpoint.origin} ${context.repository}`,
      () => this.#ping(endpoint, context),
      signal,
      () => gaveUp(context, endpoint.host, "GET /v2/"),
    );
  }

  async #ping(endpoint: RegistryEndpoint, context: ExchangeContext): Promise<EndpointAuth> {
    const response = await this.#transport.exchange({ method: "GET", url: new URL("/v2/", endpoint.origin), context });
    let auth: EndpointAuth;
    if (response.status === 200) {
      await response.discard();
      auth = { scheme: "none" };
    } else if (response.status === 401) {
      await response.discard();
      const chosen = challengeOf(response);
      if (!chosen.ok)
        throw new RegistryError("protocol", `${subject(context)}: ${endpoint.host} answered GET /v2/ with 401 but ${chosen.error}`, {
          ...context,
          endpoint: endpoint.host,
        });
      auth = chosen.auth;
    } else {
      throw await statusError(response, context, endpoint.host, `GET /v2/ (the registry API check)`);
    }
    this.remember(endpoint, auth);
    return auth;
  }

  /** What an endpoint wants, from a ping or from a later challenge that said it wants something else now. */
  remember(endpoint: RegistryEndpoint, auth: EndpointAuth): void {
    this.#pings.delete(endpoint.origin);
    this.#pings.set(endpoint.origin, auth);
    if (this.#pings.size > MAX_REMEMBERED_ENDPOINTS) this.#pings.delete(this.#pings.keys().next().value as string);
  }

  forget(key: TokenKey, token: string): void {
    this.#tokens.delete(key, token);
  }

  async authorize(req: AuthorizeRequest): Promise<Authorization> {
    const { auth, credential } = req;
    if (auth.scheme === "none") return { ok: true };
    if (auth.scheme === "basic") {
      if (!credential) return { ok: true };
      if (credential.username !== undefined && credential.password !== undefined) {
        return { ok: true, header: "Basic " + Buffer.from(`${credential.username}:${credential.password}`).toString("base64") };
      }
      return { ok: false, reason: "has no username and password, and the registry asks for Basic authentication" };
    }
    if (credential?.registryToken !== undefined) return { ok: true, header: `Bearer ${credential.registryToken}` };

    const key: TokenKey = {
      realm: auth.realm,
      service: auth.service,
      scope: `repository:${req.repository}:${req.actions ?? "pull"}`,
      identity: credentialIdentity(credential),
    };
    if (!req.fresh) {
      const token = this.#tokens.get(key);
      if (token !== undefined) return { ok: true, header: `Bearer ${token}`, cached: { key, token } };
    }
    const grant = await this.#fetching.run(
      tokenKeyId(key),
      async () => {
        const fetched = await this.#requestToken(req, auth, key.scope);
        if (!("refused" in fetched)) this.#tokens.set(key, fetched);
        return fetched;
      },
      req.signal,
      () => gaveUp(req.context, req.endpoint.host, "a token"),
    );
    if ("refused" in grant) return { ok: false, reason: grant.refused };
    return { ok: true, header: `Bearer ${grant.token}` };
  }

  /** Runs shared between callers (see InFlight), so it takes no caller's signal. */
  async #requestToken(req: AuthorizeRequest, auth: Extract<EndpointAuth, { scheme: "bearer" }>, scope: string): Promise<TokenGrant | { refused: string }> {
    const { credential, context, endpoint } = req;
    let realm: URL;
    try {
      realm = new URL(auth.realm);
    } catch {
      throw new RegistryError("protocol", `${subject(context)}: ${endpoint.host} names a token realm that is not a URL`, {
        ...context,
        endpoint: endpoint.host,
      });
    }
    const namedBy = settingsForHost(this.#settings, endpoint.host) ?? { host: endpoint.host };
    let response: HttpResponse;
    if (credential?.identityToken !== undefined) {
      const form = new URLSearchParams({ grant_type: "refresh_token", client_id: OAUTH_CLIENT_ID, refresh_token: credential.identityToken, scope });
      if (auth.service !== undefined) form.set("service", auth.service);
      response = await this.#transport.exchange({
        method: "POST",
        url: realm,
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: form.toString(),
        namedBy,
        role: "the token realm",
        context,
      });
    } else {
      const url = new URL(realm);
      if (auth.service !== undefined) url.searchParams.append("service", auth.service);
      url.searchParams.append("scope", scope);
      let authorization: { value: string; origin: string } | undefined;
      if (credential?.username !== undefined && credential.password !== undefined) {
        url.searchParams.append("account", credential.username);
        authorization = { value: "Basic " + Buffer.from(`${credential.username}:${credential.password}`).toString("base64"), origin: realm.origin };
      }
      response = await this.#transport.exchange({ method: "GET", url, authorization, namedBy, role: "the token realm", followRedirects: true, context });
    }

    const realmHost = hostOf(realm);
    if (response.status === 401 || response.status === 403) {
      await response.discard();
      return { refused: `refused by the token service ${realmHost}: HTTP ${response.status}` };
    }
    if (response.status !== 200) throw await statusError(response, context, realmHost, "the token request");
    const body = await response.bytes(TOKEN_RESPONSE_LIMIT, "token response");
    const grant = readTokenResponse(body);
    if (typeof grant === "string")
      throw new RegistryError("protocol", `${subject(context)}: the token service ${realmHost} sent ${grant}`, { ...context, endpoint: realmHost });
    return grant;
  }
}

function gaveUp(context: ExchangeContext, host: string, what: string): RegistryError {
  return new RegistryError("timeout", `${subject(context)}: gave up waiting for ${what} from ${host}, the caller's deadline passed (request aborted)`, {
    ...context,
    endpoint: host,
  });
}

/** The usable challenge of a 401 response. */
export function challengeOf(response: HttpResponse): { ok: true; auth: EndpointAuth } | { ok: false; error: string } {
  const value = response.headers["www-authenticate"];
  if (value === undefined) return { ok: false, error: "no WWW-Authenticate header" };
  const parsed = parseAuthChallenges(value);
  if (!parsed.ok) return { ok: false, error: `a WWW-Authenticate header that does not parse (${parsed.error})` };
  return chooseEndpointAuth(parsed.challenges);
}

/** A token response body, or what is wrong with it. */
export function readTokenResponse(body: Buffer): TokenGrant | string {
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return "a response that is not JSON";
  }
  if (typeof json !== "object" || json === null) return "a response that is not a JSON object";
  const o = json as Record<string, unknown>;
  // access_token is the OAuth2 name, token the Docker one; servers may send both (the same value).
  const token = typeof o.access_token === "string" && o.access_token ? o.access_token : typeof o.token === "string" && o.token ? o.token : undefined;
  if (token === undefined) return "a response without a token (neither token nor access_token)";
  const grant: TokenGrant = { token };
  if (typeof o.expires_in === "number" && Number.isFinite(o.expires_in) && o.expires_in > 0) grant.expiresInS = o.expires_in;
  if (typeof o.issued_at === "string") {
    const issued = Date.parse(o.issued_at);
    if (Number.isFinite(issued)) grant.issuedAtMs = issued;
  }
  return grant;
}

/** The error for an unexpected HTTP status: not found, unavailable (5xx, 429) or a protocol error. */
export async function statusError(response: HttpResponse, context: ExchangeContext, endpoint: string, what: string): Promise<RegistryError> {
  const summary = await response.errorSummary();
  const detail = `${what} at ${endpoint} returned HTTP ${response.status}${summary ? ` (${summary})` : ""}`;
  const details = { ...context, endpoint, status: response.status };
  if (response.status === 404) return new RegistryError("not-found", `${subject(context)}: not found: ${detail}`, details);
  if (response.status === 429 || response.status >= 500) {
    const retryAfter = header(response.headers, "retry-after");
    return new RegistryError("unavailable", `${subject(context)}: ${detail}${retryAfter ? `; retry after ${retryAfter}` : ""}`, details);
  }
  return new RegistryError("protocol", `${subject(context)}: unexpected answer: ${detail}`, details);
}
