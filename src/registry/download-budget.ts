// The bytes one piece of work (verifying one image's signatures and attestations) may read from registries,
// across all its requests: manifests, referrer lists, signature and attestation blobs. Each read takes from
// it as bytes arrive, so neither a lying Content-Length nor many small artifacts get past it.
import { RegistryError } from "./registry-error.ts";
import { RegistryUsageError } from "./registry-usage-error.ts";

/** What one image's verification may read by default (the server config's verification.maxBytesPerImage). */
export const DEFAULT_MAX_BYTES_PER_IMAGE = 16 * 1024 * 1024;

export class DownloadBudget {
  readonly limit: number;
  #used = 0;

  constructor(limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 0) throw new RegistryUsageError("invalid-byte-count", `DownloadBudget: ${limit} is not a byte count`);
    this.limit = limit;
  }

  get remaining(): number {
    return this.limit - this.#used;
  }

  /** Whether `size` more bytes would still fit. */
  fits(size: number): boolean {
    return size <= this.remaining;
  }

  /** Takes `size` bytes read for `what`; past the limit, fails with code "download-limit" (and takes nothing). */
  take(size: number, what: string, details: { registry?: string; repository?: string; endpoint?: string } = {}): void {
    if (!this.fits(size)) throw this.exceeded(what, details);
    this.#used += size;
  }

  exceeded(what: string, details: { registry?: string; repository?: string; endpoint?: string } = {}): RegistryError {
    const where = details.registry !== undefined && details.repository !== undefined ? `${details.registry}/${details.repository}: ` : "";
    return new RegistryError(
      "download-limit",
      `${where}${what} would pass the limit of ${this.limit} bytes read per image verification (${this.#used} read already)`,
      details,
    );
  }
}
