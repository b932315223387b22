// Reading Pod Security Admission's configuration file (a PodSecurityConfiguration, or kube-apiserver's
// AdmissionConfiguration that embeds one): the file at the edge, the parsing in
// src/core/pod-security/psa-config.ts. Every problem is reported at once, with its line and field.
import { parsePodSecurityConfiguration, type PodSecurityConfig } from "../core/pod-security/psa-config.ts";
import { ConfigChecks, readConfigText, singleYamlDocument } from "./config-checks.ts";

/** Reads a PodSecurityConfiguration file. Throws a ConfigError ("unreadable" or "invalid-config"). */
export async function loadPodSecurityConfiguration(file: string): Promise<PodSecurityConfig> {
  return podSecurityConfigurationOfText(await readConfigText(file, "Pod Security Admission configuration"), file);
}

/** The configuration in `text` (named `file` in errors). Throws a ConfigError listing every problem. */
export function podSecurityConfigurationOfText(text: string, file: string): PodSecurityConfig {
  const document = singleYamlDocument(text, file);
  const checks = new ConfigChecks(file, document.lineOf);
  const parsed = parsePodSecurityConfiguration(document.value);
  for (const issue of parsed.issues) checks.problem(issue.path, issue.message);
  checks.throwIfAny();
  return parsed.config!;
}
