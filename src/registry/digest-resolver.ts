// Tag → digest resolution for admission: a short-lived cache (a tag may move, so minutes, not hours),
// concurrent lookups of the same reference with the same credentials shared (100 pods of a new rollout cost
// one registry round trip), and every wait bounded by the caller's admission deadline.
import { LRUCache } from "lru-cache";
import type { CredentialLookup } from "../credentials/credential.ts";
import type { Resolution } from "../core/image-policy/digest-pinning.ts";
import { fullName, type ImageReference } from "../core/image-reference.ts";
import { credentialIdentity } from "../credentials/credential-identity.ts";
import { withDeadline } from "./deadline.ts";
import { InFlight } from "./in-flight.ts";
import { RegistryError } from "./registry-error.ts";

/** What the resolver needs of a registry client (RegistryClient implements it). */
export interface DigestSource {
  resolveDigest(ref: ImageReference, opts: { lookup: CredentialLookup; signal: AbortSignal }): Promise<{ digest: string; credentialSource: string }>;
}

export interface DigestResolverOptions {
  /** How long a resolved tag is trusted (default 30 s; 0 disables the cache, concurrent lookups still share). */
  ttlMs: number;
  maxEntries: number;
}

export const DEFAULT_RESOLVER_OPTIONS: DigestResolverOptions = { ttlMs: 30_000, maxEntries: 10_000 };

type Resolved = { digest: string; credentialSource: string };

export class DigestResolver {
  readonly options: DigestResolverOptions;
  private readonly source: DigestSource;
  private readonly cache: LRUCache<string, Resolved> | undefined;
  private readonly inFlight = new InFlight<Resolved>();
  /** Lookups that reached the registry (cache misses not joined to a lookup in flight). */
  lookups = 0;
  hits = 0;

  constructor(source: DigestSource, options: Partial<DigestResolverOptions> = {}, now: () => number = () => performance.now()) {
    this.source = source;
    this.options = { ...DEFAULT_RESOLVER_OPTIONS, ...options };
    this.cache =
      this.options.ttlMs > 0
        ? new LRUCache<string, Resolved>({ max: this.options.maxEntries, ttl: this.options.ttlMs, perf: { now }, ttlResolution: 0 })
        : undefined;
  }

  /**
   * The digest `ref`'s tag points to, looked up with the credentials `lookup` gives. Never throws: failures
   * (including the deadline passing) come back as `{ok: false}` for the caller's failure policy.
   */
  async resolve(ref: ImageReference, lookup: CredentialLookup, deadline: number): Promise<Resolution> {
    const key = cacheKey(ref, lookup);
    const cached = this.cache?.get(key);
    if (cached) {
      this.hits++;
      return { ok: true, ...cached };
    }
    const start = async (): Promise<Resolved> => {
      this.lookups++;
      const resolved = await this.lookup(ref, lookup, deadline);
      this.cache?.set(key, resolved); // failures are not cached: the next admission tries the registry again
      return resolved;
    };
    // Each caller waits only until its own deadline (withDeadline), so no signal is passed to the shared lookup.
    const pending = this.inFlight.run(key, start);
    try {
      return { ok: true, ...(await withDeadline(pending, deadline)) };
    } catch (e) {
      // The code travels with the failure: "not-found" is a denial, "unreachable" a question for the failure policy.
      return { ok: false, error: (e as Error).message, ...(e instanceof RegistryError ? { code: e.code } : {}) };
    }
  }

  clear(): void {
    this.cache?.clear();
  }

  private async lookup(ref: ImageReference, lookup: CredentialLookup, deadline: number): Promise<Resolved> {
    const signal = AbortSignal.timeout(Math.max(1, deadline - Date.now()));
    return this.source.resolveDigest(ref, { lookup, signal });
  }
}

/** The image (tag included) and the credentials that would be offered for it. */
function cacheKey(ref: ImageReference, lookup: CredentialLookup): string {
  return `${fullName(ref)}\u0000${credentialIdentity(ref, lookup)}`;
}
