// What stops a serving certificate from being made or self-managed TLS from starting, by code; the message says
// which flag, name or setting is at fault. A certificate or key file that cannot be used is a
// CertificateFilesError (certificate-files.ts).
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type TlsErrorCode =
  /** A validity that is not a positive duration, or a certificate that would end before it is issued. */
  | "invalid-validity"
  /** A host that cannot be a certificate's DNS name. */
  | "invalid-dns-name"
  /** A host given as an IP address that is not one. */
  | "invalid-ip-address"
  /** A CA key of a type or curve certificates cannot be signed with here. */
  | "unsupported-ca-key"
  /** --tls-timeline is not ca=…,cert=…,propagation=… with durations, or its durations do not fit together. */
  | "invalid-timeline"
  /** Rotation settings whose durations do not fit together. */
  | "invalid-rotation-settings"
  /** --tls-secret is not NAMESPACE/NAME. */
  | "invalid-secret-name"
  /** Self-managed TLS was started without --tls-secret. */
  | "missing-secret"
  /** --tls-secret without a Kubernetes API to keep the Secret in. */
  | "needs-kubernetes-api";

export class TlsError extends ImprimaturError<TlsErrorCode> {}
