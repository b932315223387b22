// What the node image proxy refuses on its own account, by code: a pull it could not record durably (the kubelet is
// told the pull failed), and a credential hash key on disk that records cannot be trusted with (it does not start).
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type NodeProxyErrorCode =
  /** The runtime pulled the image, but the pull's intent could not be made durable: the pull is reported failed. */
  | "pull-not-recorded"
  /** The credential hash key file is not 32 bytes. */
  | "invalid-credential-key";

export class NodeProxyError extends ImprimaturError<NodeProxyErrorCode> {}
