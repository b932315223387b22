// How a verifier shares its work with other processes (serve --workers: src/workers/shared-verifications.ts): on a
// miss of its own cache it claims the key, and either gets a result another process verified or verifies it itself
// and settles the claim, so that one image is verified once across them.
import type { VerificationResult } from "./image-verifier.ts";

/** What a verifier is told when it claims a key it does not have. */
export type Claim =
  /** Another process's result (or one kept from it). */
  | { result: VerificationResult }
  /** Verify it here, then settle: with the result and how long it may be kept (undefined: not kept), or undefined when giving up. */
  | { verify: (result: VerificationResult | undefined, keepMs?: number) => void };

export interface SharedVerifications {
  claim(key: string, deadline: number): Promise<Claim>;
}
