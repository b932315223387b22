// Decisions of remote backends, keyed by backend, the caller's cluster and review spec (clusters sharing one
// server may scope policies differently, so one cluster's answer is never served to another): allows live long (default 1 h) so
// replicas can scale through a short backend outage, denials short (default 30 s) so a fix shows quickly.
import { LRUCache } from "lru-cache";
import type { Decision } from "../core/decision.ts";
import { canonicalSpecKey, type ImageReviewSpec } from "../core/image-review.ts";

export interface DecisionCacheOptions {
  allowTtlMs: number;
  denyTtlMs: number;
  maxEntries: number;
}

export const DEFAULT_CACHE_OPTIONS: DecisionCacheOptions = { allowTtlMs: 3_600_000, denyTtlMs: 30_000, maxEntries: 10_000 };

export class DecisionCache {
  readonly options: DecisionCacheOptions;
  private readonly lru: LRUCache<string, Decision>;
  hits = 0;
  misses = 0;

  /** `now` is injectable so tests can move time instead of sleeping. */
  constructor(options: Partial<DecisionCacheOptions> = {}, now: () => number = () => performance.now()) {
    this.options = { ...DEFAULT_CACHE_OPTIONS, ...options };
    this.lru = new LRUCache<string, Decision>({
      max: this.options.maxEntries,
      ttl: Math.max(this.options.allowTtlMs, this.options.denyTtlMs, 1),
      perf: { now },
      ttlResolution: 0,
    });
  }

  /** `cluster`: the caller's cluster (undefined: a caller with none, which has entries of its own). */
  get(backend: string, spec: ImageReviewSpec, cluster?: string): Decision | undefined {
    const hit = this.lru.get(key(backend, spec, cluster));
    if (hit) this.hits++;
    else this.misses++;
    return hit;
  }

  set(backend: string, spec: ImageReviewSpec, decision: Decision, cluster?: string): void {
    const ttl = decision.allowed ? this.options.allowTtlMs : this.options.denyTtlMs;
    if (ttl <= 0) return;
    this.lru.set(key(backend, spec, cluster), decision, { ttl });
  }

  clear(): void {
    this.lru.clear();
  }

  get size(): number {
    return this.lru.size;
  }
}

function key(backend: string, spec: ImageReviewSpec, cluster: string | undefined): string {
  // "\u0001" for no cluster: no cluster name holds a control character, so the two can never meet.
  return `${backend}\u0000${cluster ?? "\u0001"}\u0000${canonicalSpecKey(spec)}`;
}
