// What the CRI image-service proxy refuses, by code: an endpoint it cannot serve, and a client connection whose
// HTTP/2 frames it cannot pass on (unix-authority.ts). A message that is not valid protobuf is a CriMessageError.
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type CriErrorCode =
  /** The listen endpoint is not unix:///path. */
  | "unsupported-endpoint"
  /** The client's first bytes are not the HTTP/2 connection preface. */
  | "not-http2"
  /** Frames out of order or shorter than they say: a header block interrupted, a CONTINUATION with no block. */
  | "malformed-frames"
  /** A header block that passed its size limit before it ended. */
  | "header-block-too-large";

export class CriError extends ImprimaturError<CriErrorCode> {}
