// Everything the engine is made of, apart from the engine: src/engine/engine-builder.ts makes it, online or offline.
import type { Logger } from "pino";
import type { AuditLog } from "../audit/audit-log.ts";
import type { DecisionCache } from "../backends/decision-cache.ts";
import type { ImageReviewService } from "../backends/review-service.ts";
import type { WebhookBackend } from "../backends/webhook-backend.ts";
import type { ServerConfig } from "../config/server-config.ts";
import type { PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import type { HonouredNamespaces } from "../core/policy-exception/apply-exceptions.ts";
import type { DigestResolver } from "../registry/digest-resolver.ts";
import type { ClusterToolbox } from "./cluster-tools.ts";
import type { PolicySets } from "./policy-sets.ts";
import type { Recorder } from "./recorder.ts";

export interface EngineParts {
  policies: PolicySets;
  tools: ClusterToolbox;
  reviews: ImageReviewService;
  remotes: readonly WebhookBackend[];
  cache: DecisionCache;
  /** Absent offline. */
  resolver: DigestResolver | undefined;
  /** Absent: an override that must be recorded is refused. */
  audit: AuditLog | undefined;
  /** Closes what the parts opened (registry connections, backends). */
  close: () => Promise<void>;
  logger: Logger;
  recorder: Recorder;
  config: ServerConfig;
  podSecurity: PodSecurityContext | undefined;
  requirePolicies: boolean;
  honouredExceptions: HonouredNamespaces;
}
