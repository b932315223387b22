// What the registry client refuses before it asks any registry: arguments it cannot work with. Not a
// RegistryError: nothing was asked, so no failure policy or retry applies; the caller is at fault.
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type RegistryUsageErrorCode =
  /** A digest that is not sha256:… or sha512:…. */
  | "invalid-digest"
  /** A blob to push that does not hash to the digest given with it. */
  | "body-digest-mismatch"
  /** A byte limit that is not a non-negative whole number. */
  | "invalid-byte-count";

export class RegistryUsageError extends ImprimaturError<RegistryUsageErrorCode> {}
