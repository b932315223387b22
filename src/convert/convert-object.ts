// Which converter reads an object: by its apiVersion and kind. Objects of other kinds are reported, not converted.
import { FindingLog, type ConversionResult, type Json } from "./conversion.ts";
import { convertImageValidatingPolicy, IMAGE_VALIDATING_POLICY_API_VERSIONS, IMAGE_VALIDATING_POLICY_KINDS } from "./kyverno-image-validating-policy.ts";
import { convertKyvernoPolicy, KYVERNO_POLICY_API_VERSIONS } from "./kyverno-policy.ts";
import { convertClusterImagePolicy, POLICY_CONTROLLER_API_VERSIONS } from "./policy-controller.ts";

/** The kinds `imprimatur convert` reads, for help and errors. */
export const CONVERTIBLE_KINDS = [
  "ClusterPolicy and Policy (kyverno.io/v1, v2beta1): their verifyImages rules",
  "ImageValidatingPolicy and NamespacedImageValidatingPolicy (policies.kyverno.io/v1alpha1, v1beta1, v1)",
  "ClusterImagePolicy (policy.sigstore.dev/v1beta1, v1alpha1)",
];

export function convertObject(object: Json, file: string): ConversionResult {
  const apiVersion = typeof object.apiVersion === "string" ? object.apiVersion : "";
  const kind = typeof object.kind === "string" ? object.kind : "";
  if ((kind === "ClusterPolicy" || kind === "Policy") && KYVERNO_POLICY_API_VERSIONS.includes(apiVersion)) return convertKyvernoPolicy(object, file);
  if (kind === "ClusterImagePolicy" && POLICY_CONTROLLER_API_VERSIONS.includes(apiVersion)) return convertClusterImagePolicy(object, file);
  if (IMAGE_VALIDATING_POLICY_KINDS.includes(kind) && IMAGE_VALIDATING_POLICY_API_VERSIONS.includes(apiVersion))
    return convertImageValidatingPolicy(object, file);
  const name = typeof (object.metadata as Json | undefined)?.name === "string" ? ((object.metadata as Json).name as string) : "";
  const log = new FindingLog(`${file} ${kind}/${name}`);
  log.note("", `${apiVersion} ${kind} is not a kind imprimatur convert reads (it reads ${CONVERTIBLE_KINDS.join("; ")}): skipped`);
  return { documents: [], findings: log.findings };
}
