// One signature verification per image across every worker of `serve --workers` (src/verification/image-verifier.ts
// asks here on a miss of its own cache). The primary holds the shared results and who is verifying what: the first
// worker to ask for a key verifies it, the others wait for its result; a result is kept for as long as the worker's
// own cache keeps it (verified: the verified TTL; denied: the denied TTL; an outage: never kept, only handed to
// those who waited for it). The key carries everything a result depends on (digest, policy rule, the primary's
// policy set version, the credentials offered, the keys read), so a result is never used beyond what the asking
// worker's own cache would have used it for.
import { LRUCache } from "lru-cache";
import type { Claim, SharedResult, SharedVerifications, VerificationResult } from "../verification/image-verifier.ts";

/** A verification claimed and not settled is given to the next waiter after this long (its worker hung or died). */
const CLAIM_TIMEOUT_MS = 60_000;

/** What a waiter learns: the owner's result, or that the claim is now its own. */
type Turn = SharedResult | "yours";

interface Pending {
  owner: string;
  waiters: Array<(turn: Turn) => void>;
  timer: NodeJS.Timeout;
}

/**
 * The primary's record of shared results and claims. Each claimant is named (a worker's id, or "primary") so that
 * a worker's exit hands its claims to the next waiter at once.
 */
export class VerificationBroker {
  private readonly results: LRUCache<string, VerificationResult>;
  private readonly pending = new Map<string, Pending>();
  /** Verifications handed out (claims answered "verify here") and results handed out; for tests and metrics. */
  claimsGranted = 0;
  resultsShared = 0;

  constructor(opts: { maxEntries?: number; now?: () => number } = {}) {
    this.results = new LRUCache({ max: opts.maxEntries ?? 10_000, ttlAutopurge: false, ...(opts.now ? { perf: { now: opts.now } } : {}), ttlResolution: 0 });
  }

  /** A claim by `claimant`: resolves with a result, or with the go-ahead (then `settle` or `giveUp` it). */
  claim(key: string, claimant: string): Promise<SharedResult | { verify: true }> {
    const kept = this.results.get(key);
    if (kept) {
      this.resultsShared++;
      // What is left of its time, not the whole of it again.
      return Promise.resolve({ result: kept, keepMs: Math.max(0, this.results.getRemainingTTL(key)) });
    }
    const pending = this.pending.get(key);
    if (!pending) {
      this.grant(key, claimant, []);
      return Promise.resolve({ verify: true });
    }
    return new Promise((resolve) =>
      pending.waiters.push((turn) => {
        if (turn !== "yours") {
          this.resultsShared++;
          resolve(turn);
        } else {
          this.grant(key, claimant, pending.waiters);
          resolve({ verify: true });
        }
      }),
    );
  }

  /** The claimant's result: kept for `keepMs` when given, and handed to every waiter. */
  settle(key: string, claimant: string, result: VerificationResult, keepMs: number | undefined): void {
    const pending = this.pending.get(key);
    if (!pending || pending.owner !== claimant) return;
    this.release(key, pending);
    if (keepMs !== undefined && keepMs > 0) this.results.set(key, result, { ttl: keepMs });
    for (const waiter of pending.waiters) waiter({ result, keepMs });
  }

  /** The claimant gave up (its deadline, an error): the next waiter verifies instead. */
  giveUp(key: string, claimant: string): void {
    const pending = this.pending.get(key);
    if (!pending || pending.owner !== claimant) return;
    this.handOn(key, pending);
  }

  /** A worker exited: whatever it was verifying goes to the next waiter. */
  claimantGone(claimant: string): void {
    for (const [key, pending] of [...this.pending]) if (pending.owner === claimant) this.handOn(key, pending);
  }

  /** A new policy set: no result of an older one is asked for again (their keys name the old version). */
  clear(): void {
    this.results.clear();
  }

  /** The broker as a verifier in the primary's own process uses it (the background scan's engine). */
  local(claimant = "primary"): SharedVerifications {
    return { claim: (key) => this.claim(key, claimant).then((answer) => this.asClaim(key, claimant, answer)) };
  }

  /** A broker answer as a verifier's Claim, settling back here. */
  private asClaim(key: string, claimant: string, answer: SharedResult | { verify: true }): Claim {
    if ("result" in answer) return answer;
    let settled = false;
    return {
      verify: (result, keepMs) => {
        if (settled) return;
        settled = true;
        if (result) this.settle(key, claimant, result, keepMs);
        else this.giveUp(key, claimant);
      },
    };
  }

  private grant(key: string, owner: string, waiters: Pending["waiters"]): void {
    this.claimsGranted++;
    const timer = setTimeout(() => this.giveUp(key, owner), CLAIM_TIMEOUT_MS);
    timer.unref();
    this.pending.set(key, { owner, waiters, timer });
  }

  private release(key: string, pending: Pending): void {
    clearTimeout(pending.timer);
    this.pending.delete(key);
  }

  /** The first waiter becomes the owner (with the rest still waiting); none: the claim is gone. */
  private handOn(key: string, pending: Pending): void {
    this.release(key, pending);
    const [next, ...rest] = pending.waiters;
    if (!next) return;
    // The next waiter's resolve grants it the claim with the remaining waiters (claim(), above).
    pending.waiters = rest;
    next("yours");
  }
}
