// One call into the engine: which endpoint asked, by when it must answer, and who sent it. Its own file so that
// the engine's helpers (audit-overrides.ts) can name it without importing the engine.
import type { Caller } from "../audit/caller.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import type { Endpoint } from "./recorder.ts";

/** Who asks, for how long, and whether the request leaves traces (dry runs and `check` do not). */
export interface AdmissionCall {
  endpoint: Endpoint;
  /** Epoch milliseconds by which the answer is needed. */
  deadline: number;
  uid?: string;
  user?: string;
  dryRun: boolean;
  /**
   * Who sent the request; its cluster picks the policies scoped with spec.clusters. Undefined for in-process
   * callers (`check`, `imprimatur test`), which apply every policy whatever its clusters.
   */
  caller?: Caller;
  /**
   * A request of the server's own cluster with no caller (the background scan of its pods): judged by the policies
   * spec.clusters gives that cluster (serve --cluster-name; unnamed: those scoped to no cluster), not by every policy.
   */
  ownCluster?: boolean;
  /**
   * Why the server cannot judge this review in time (too many in flight, or the request waited past its deadline
   * before it was read): it is answered with the failure policy's result, as a review whose backends do not answer.
   */
  overloaded?: string;
  /**
   * Registry credentials the caller presented with the request (a node's pull: the kubelet's AuthConfig, bound to
   * the image's registry): used for the review's registry reads instead of the pod's pull secrets, which a node
   * does not read.
   */
  presentedCredentials?: CredentialLookup;
}
