// The one error type of the registry client. Callers (admission, the CLI) branch on `code` and `retryable`;
// the message is for a cluster operator: which registry, which repository, what happened, what to do.
// Messages never carry a password, token or Authorization value.
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type RegistryErrorCode =
  /** No answer: connection refused, DNS, TLS handshake failure. */
  | "unreachable"
  /**
   * Not asked: the host is, or resolves to, a loopback, link-local, unspecified or cloud metadata address that the
   * registries file does not allow for it (allowLocalAddresses). A decision, not an outage: it denies.
   */
  | "address-refused"
  /** Every credential (or anonymous access) was refused. */
  | "unauthorized"
  /** The repository, manifest or blob does not exist (HTTP 404). */
  | "not-found"
  /** The bytes do not hash to the digest the registry or the reference promised. */
  | "digest-mismatch"
  /** A manifest, blob or token response is larger than its limit. */
  | "too-large"
  /** The bytes read for one piece of work (one image's verification) would pass its DownloadBudget. */
  | "download-limit"
  /** The registry answered something this client must not accept: bad headers, bad JSON, unsafe redirects. */
  | "protocol"
  /** The registry is there but failing: HTTP 5xx or 429. */
  | "unavailable"
  /** The per-request timeout or the caller's deadline (its AbortSignal) ran out. */
  | "timeout";

/** One endpoint (mirror or upstream) that was tried and how it failed. */
export interface EndpointFailure {
  endpoint: string;
  code: RegistryErrorCode;
  message: string;
}

export interface RegistryErrorDetails {
  registry?: string;
  repository?: string;
  /** The host actually contacted: a mirror, "registry-1.docker.io", a token realm's host. */
  endpoint?: string;
  /** Overrides the default for the code (see RETRYABLE_BY_DEFAULT). */
  retryable?: boolean;
  /** For "unauthorized": the `source` of each credential tried, "anonymous" for none. Never values. */
  credentialSources?: string[];
  /** When mirrors were involved: every endpoint tried, in order. */
  attempts?: EndpointFailure[];
  /** HTTP status, when the failure was an HTTP answer. */
  status?: number;
  cause?: unknown;
}

// Retrying is worth it when the cause is transient; a refusal, a missing image or tampered bytes stay so.
const RETRYABLE_BY_DEFAULT: Record<RegistryErrorCode, boolean> = {
  unreachable: true,
  "address-refused": false,
  unauthorized: false,
  "not-found": false,
  "digest-mismatch": false,
  "too-large": false,
  "download-limit": false,
  protocol: false,
  unavailable: true,
  timeout: true,
};

export class RegistryError extends ImprimaturError<RegistryErrorCode> {
  readonly retryable: boolean;
  readonly registry: string | undefined;
  readonly repository: string | undefined;
  readonly endpoint: string | undefined;
  readonly credentialSources: string[] | undefined;
  readonly attempts: EndpointFailure[] | undefined;
  readonly status: number | undefined;

  constructor(code: RegistryErrorCode, message: string, details: RegistryErrorDetails = {}) {
    super(code, message, { cause: details.cause });
    this.retryable = details.retryable ?? RETRYABLE_BY_DEFAULT[code];
    this.registry = details.registry;
    this.repository = details.repository;
    this.endpoint = details.endpoint;
    this.credentialSources = details.credentialSources;
    this.attempts = details.attempts;
    this.status = details.status;
  }
}
