// What Pod Security Admission needs to judge: its configuration (defaults for unlabelled namespaces, exemptions;
// PSA's own defaults without a file) and the shipped profiles at every level and version, compiled on first use.
// Built once by serve and check from the same flags.
import { loadPodSecurityConfiguration } from "../config/pod-security-config.ts";
import { DEFAULT_POD_SECURITY_CONFIG } from "../core/pod-security/psa-config.ts";
import { cachedProfileAt, type PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import { bindProfileClusterWide, NEWEST_POLICY_MINOR, shippedProfiles } from "./profiles.ts";

/** Throws what loading the configuration throws (a ConfigError with the line and field). */
export async function podSecurityContext(configFile: string | undefined, opts: { unknownNamespaceHint?: string } = {}): Promise<PodSecurityContext> {
  const config = configFile ? await loadPodSecurityConfiguration(configFile) : DEFAULT_POD_SECURITY_CONFIG;
  const profiles = await shippedProfiles();
  return {
    config,
    profileAt: cachedProfileAt((name) => bindProfileClusterWide(name, profiles)),
    newestMinor: NEWEST_POLICY_MINOR,
    ...(opts.unknownNamespaceHint ? { unknownNamespaceHint: opts.unknownNamespaceHint } : {}),
  };
}
