// Whether the server should get traffic, and if not, why: what /readyz answers on the HTTPS port and on the
// metrics port. Ready once the policies are loaded and the serving certificate is in place, until draining begins.

export interface ReadinessOptions {
  /** Not ready while no policy is in force (`serve --require-policies`). */
  requirePolicies: boolean;
  /** The certificate source, which may say the served certificate should get no traffic (expired unrenewed). */
  certificate: { notReady?(): string | undefined } | undefined;
}

export class Readiness {
  private policiesInForce: (() => boolean) | undefined;
  private certificateInPlace = false;
  private draining = false;
  private readonly opts: ReadinessOptions;

  constructor(opts: ReadinessOptions) {
    this.opts = opts;
  }

  /** The first policy set is loaded; `inForce` says, from then on, whether a policy is in force. */
  policiesLoaded(inForce: () => boolean): void {
    this.policiesInForce = inForce;
  }

  certificateReady(): void {
    this.certificateInPlace = true;
  }

  /** Stopping: not ready from now on. */
  drain(): void {
    this.draining = true;
  }

  /** Why the server is not ready, or undefined when it is. */
  notReady(): string | undefined {
    if (this.draining) return "shutting down";
    if (!this.policiesInForce) return "the policies are not loaded yet";
    if (!this.certificateInPlace) return "the serving certificate is not in place yet";
    if (this.opts.requirePolicies && !this.policiesInForce()) return "no policy is in force yet (--require-policies)";
    // A certificate kept in a Secret may expire unrenewed: then this replica should get no traffic.
    return this.opts.certificate?.notReady?.();
  }
}
