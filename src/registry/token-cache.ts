// Bearer tokens from token realms, kept until shortly before they expire.
//
// The key is (realm, service, scope, credential identity): a token proves what one credential may do, so a
// token fetched with one credential is never handed out for another one or for anonymous access. The identity
// is a keyed hash of the credential's secret fields, so the cache never holds a secret as a key, and two
// credentials with the same source name but different secrets never share a token.
import { createHmac, randomBytes } from "node:crypto";
import type { RegistryCredential } from "../credentials/credential.ts";

export const ANONYMOUS_IDENTITY = "anonymous";

// Per process: the identities are only compared within this process, and a random key keeps a leaked key
// (in a heap dump, say) from being checked against guessed passwords.
const IDENTITY_KEY = randomBytes(32);

/** "anonymous" without a credential (or one with no secret fields), else an HMAC-SHA256 of its secret fields. */
export function credentialIdentity(credential: RegistryCredential | undefined): string {
  if (!credential) return ANONYMOUS_IDENTITY;
  const { username, password, identityToken, registryToken } = credential;
  if (username === undefined && password === undefined && identityToken === undefined && registryToken === undefined) return ANONYMOUS_IDENTITY;
  // JSON of an array keeps field boundaries unambiguous ("a:b" + "c" vs "a" + "b:c").
  const material = JSON.stringify([username ?? null, password ?? null, identityToken ?? null, registryToken ?? null]);
  return "hmac:" + createHmac("sha256", IDENTITY_KEY).update(material).digest("hex");
}

export interface TokenKey {
  realm: string;
  service: string | undefined;
  scope: string;
  identity: string;
}

/** Token lifetime when the token server gives no expires_in (the Docker token spec's default). */
const DEFAULT_TOKEN_LIFETIME_S = 60;
/**
 * The longest a token is kept, whatever expires_in says: a token service answering 1e308 (or a year) would
 * otherwise have one token used until the server restarts, however the registry's mind changed meanwhile.
 */
const MAX_CACHED_LIFETIME_S = 3600;
/** A token is dropped this long before it expires, so that it does not expire in flight. */
const EXPIRY_MARGIN_MS = 10_000;
const DEFAULT_MAX_ENTRIES = 1000;

export interface TokenGrant {
  token: string;
  /** expires_in from the token response, seconds. */
  expiresInS?: number;
  /** issued_at from the token response, epoch milliseconds. */
  issuedAtMs?: number;
}

/**
 * When a token stops being served from the cache: issued_at (or receipt, whichever is earlier, so a token
 * server with a fast clock cannot stretch the lifetime) plus expires_in (an hour at most), minus a margin. Tokens whose whole
 * lifetime is within the margin are not cached at all.
 */
export function cacheUntil(grant: TokenGrant, receivedAtMs: number): number {
  const lifetimeMs = Math.min(grant.expiresInS ?? DEFAULT_TOKEN_LIFETIME_S, MAX_CACHED_LIFETIME_S) * 1000;
  const issuedAt = grant.issuedAtMs !== undefined && grant.issuedAtMs < receivedAtMs ? grant.issuedAtMs : receivedAtMs;
  return issuedAt + lifetimeMs - Math.min(EXPIRY_MARGIN_MS, lifetimeMs / 2);
}

export class TokenCache {
  readonly #entries = new Map<string, { token: string; until: number }>();
  readonly #now: () => number;
  readonly #maxEntries: number;

  constructor(options: { now?: () => number; maxEntries?: number } = {}) {
    this.#now = options.now ?? Date.now;
    this.#maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  }

  get(key: TokenKey): string | undefined {
    const id = cacheKey(key);
    const entry = this.#entries.get(id);
    if (!entry) return undefined;
    if (this.#now() >= entry.until) {
      this.#entries.delete(id);
      return undefined;
    }
    return entry.token;
  }

  /** Stores a grant received now; returns false when its lifetime is too short to be worth caching. */
  set(key: TokenKey, grant: TokenGrant): boolean {
    const now = this.#now();
    const until = cacheUntil(grant, now);
    if (until <= now) return false;
    const id = cacheKey(key);
    this.#entries.delete(id); // re-insert at the end: Map order is insertion order, oldest first
    this.#entries.set(id, { token: grant.token, until });
    if (this.#entries.size > this.#maxEntries) this.#evict(now);
    return true;
  }

  /** Drops the token for `key` if it is still `token` (a concurrent refresh may have replaced it). */
  delete(key: TokenKey, token: string): void {
    const id = cacheKey(key);
    if (this.#entries.get(id)?.token === token) this.#entries.delete(id);
  }

  get size(): number {
    return this.#entries.size;
  }

  #evict(now: number): void {
    for (const [id, entry] of this.#entries) if (entry.until <= now) this.#entries.delete(id);
    for (const id of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxEntries) break;
      this.#entries.delete(id);
    }
  }
}

/** A string naming a TokenKey, for maps. */
export function tokenKeyId(key: TokenKey): string {
  return cacheKey(key);
}

function cacheKey(key: TokenKey): string {
  return JSON.stringify([key.realm, key.service ?? null, key.scope, key.identity]);
}
