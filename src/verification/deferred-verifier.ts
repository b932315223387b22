// The signature verifier, loaded when a policy that verifies comes into force or an image is first verified,
// rather than when a server starts: its code brings the Sigstore, Notation, COSE, JOSE and X.509 libraries, 14 MiB
// of an idle server that verifies nothing (bench/background-scan.md, 2026-12-01). Until then it has nothing cached
// to answer from, and only counts the policy generations it is told, so that the loaded verifier names its results
// as an eagerly loaded one would (serve --workers shares them by that name).
import type { ImageVerifier, ImageVerifierOptions, VerificationRequest, VerificationResult } from "./image-verifier.ts";

/** What the engine asks of a verifier: ImageVerifier, or this stand-in that loads it on demand. */
export type Verifier = Pick<ImageVerifier, "clear" | "peekAll" | "verify">;

let verifierCode: Promise<typeof import("./image-verifier.ts")> | undefined;

/** Loads the verifier's code, once per process; a rejection (files missing from an install) denies every verification. */
export function loadVerifierCode(): Promise<typeof import("./image-verifier.ts")> {
  verifierCode ??= import("./image-verifier.ts");
  return verifierCode;
}

export class DeferredImageVerifier implements Verifier {
  readonly #options: ImageVerifierOptions;
  readonly #load: typeof loadVerifierCode;
  #verifier: ImageVerifier | undefined;
  #loading: Promise<ImageVerifier> | undefined;
  /** The generation clear() set last, handed to the verifier once it exists (ImageVerifier starts at 0). */
  #generation = 0;

  /** `load`: how the code is loaded (tests give one that fails). */
  constructor(options: ImageVerifierOptions, load = loadVerifierCode) {
    this.#options = options;
    this.#load = load;
  }

  /** The verifier itself, loading it first when needed. */
  loaded(): Promise<ImageVerifier> {
    this.#loading ??= this.#load().then(({ ImageVerifier }) => {
      const verifier = new ImageVerifier(this.#options);
      if (this.#generation !== 0) verifier.clear(this.#generation);
      this.#verifier = verifier;
      return verifier;
    });
    return this.#loading;
  }

  clear(generation?: number): void {
    this.#generation = generation ?? this.#generation + 1;
    this.#verifier?.clear(this.#generation);
  }

  /** Nothing is cached before the verifier exists: undefined sends every request to verify(). */
  peekAll(requests: readonly VerificationRequest[]): VerificationResult[] | undefined {
    return this.#verifier ? this.#verifier.peekAll(requests) : undefined;
  }

  async verify(request: VerificationRequest, deadline: number): Promise<VerificationResult> {
    if (this.#verifier) return this.#verifier.verify(request, deadline);
    // Named with the generation it was asked under: a reload while the code loads must not name it with the next.
    const askedUnder = this.#generation;
    let verifier: ImageVerifier;
    try {
      verifier = await this.loaded();
    } catch (e) {
      // Denied, not unavailable: a server set to fail open must not admit what it cannot check for this reason.
      return { status: "denied", reason: `the signature verification code could not be loaded: ${(e as Error).message}` };
    }
    return verifier.verify(request, deadline, askedUnder);
  }
}
