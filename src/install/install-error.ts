// What stops `imprimatur install` / `uninstall`, by code. The step that failed and what to run next are part of
// the message; the CLI prints them and exits 1.
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type InstallErrorCode =
  /** The rendered manifests are not an Imprimatur install (no Deployment of it, no webhooks). */
  | "manifests"
  /** kubectl could not be run, or a kubectl step failed. */
  | "kubectl";

export class InstallError extends ImprimaturError<InstallErrorCode> {}

/** The steps of install and uninstall, in order; a failed one is the InstallStepError's code. */
export type InstallStep = "image" | "cluster" | "render" | "crds" | "policies" | "apply" | "rollout" | "readyz" | "probe" | "enforce" | "webhooks" | "workload";

/** What a failed step tells the user: why, what to run next, and what state the cluster is left in. */
export class InstallStepError extends ImprimaturError<InstallStep> {
  readonly next: string;
  readonly clusterState: string;
  constructor(step: InstallStep, reason: string, next: string, clusterState: string) {
    super(step, reason);
    this.next = next;
    this.clusterState = clusterState;
  }
}
