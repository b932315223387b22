// Kyverno ClusterPolicy and Policy (kyverno.io/v1, v2beta1): each verifyImages entry becomes an ImagePolicy (a
// NamespacedImagePolicy for a Policy). Kyverno verifies every verifyImages entry whose imageReferences an image
// matches, and an ImagePolicy decides an image by its first matching rule, so each entry is a policy of its own;
// all of them must allow, as all of Kyverno's rules must pass. Images an entry does not name are allowed by it.
// Kyverno's defaults: mutateDigest and verifyDigest true, required true, and the policy's
// validationFailureAction Audit unless set (a verifyImages entry's failureAction wins).
import { convertKyvernoAttestorSets } from "./kyverno-attestors.ts";
import { convertKyvernoScope } from "./kyverno-scope.ts";
import { FindingLog, POLICY_API_VERSION, isJson, listOf, policyName, stringsOf, type ConversionResult, type Json } from "./conversion.ts";

export const KYVERNO_POLICY_API_VERSIONS = ["kyverno.io/v1", "kyverno.io/v2beta1"];

export function convertKyvernoPolicy(object: Json, file: string): ConversionResult {
  const kind = object.kind as string;
  const meta = isJson(object.metadata) ? object.metadata : {};
  const name = typeof meta.name === "string" ? meta.name : "";
  const namespace = kind === "Policy" ? (typeof meta.namespace === "string" && meta.namespace !== "" ? meta.namespace : "default") : undefined;
  const log = new FindingLog(`${file} ${kind}/${name}`);
  const spec = isJson(object.spec) ? object.spec : {};
  const from = `${kind}/${name} (${object.apiVersion as string})`;
  const policyAction = failureAction(spec.validationFailureAction) ?? "Audit";
  if (spec.validationFailureActionOverrides !== undefined) {
    const overrides = listOf(spec.validationFailureActionOverrides).filter(isJson);
    const stricterSomewhere = overrides.some((o) => failureAction(o.action) === "Enforce") && policyAction === "Audit";
    const message = "per-namespace failure actions are not carried over: the policy's action applies in every namespace";
    if (stricterSomewhere) log.weaker("spec.validationFailureActionOverrides", `${message} (Audit where the original enforces)`);
    else log.note("spec.validationFailureActionOverrides", message);
  }
  for (const field of ["background", "webhookTimeoutSeconds", "failurePolicy", "applyRules", "admission", "emitWarning"])
    if (spec[field] !== undefined) log.note(`spec.${field}`, "not carried over (serve's flags and ServerConfig decide this for every policy)");

  const rules = listOf(spec.rules);
  const documents: ConversionResult["documents"] = [];
  const verifying = rules.filter((r) => isJson(r) && listOf(r.verifyImages).length > 0).length;
  rules.forEach((rule, i) => {
    const at = `spec.rules[${i}]`;
    if (!isJson(rule)) return;
    const entries = listOf(rule.verifyImages);
    if (entries.length === 0) {
      log.note(
        at,
        `${typeof rule.name === "string" ? `rule ${rule.name}` : "this rule"} does not verify images: not converted (keep it in Kyverno, or write a PodRestriction)`,
      );
      return;
    }
    const scope = convertKyvernoScope(rule, at, namespace, log);
    for (const field of ["preconditions", "context", "celPreconditions"])
      if (rule[field] !== undefined) log.note(`${at}.${field}`, "not carried over: the converted policy applies whatever they say (stricter)");
    entries.forEach((entry, j) => {
      const entryAt = `${at}.verifyImages[${j}]`;
      if (!isJson(entry)) return;
      const converted = convertVerifyImages(
        entry,
        entryAt,
        log,
        failureAction(entry.failureAction) ?? failureAction(entry.validationFailureAction) ?? policyAction,
      );
      if (!converted) return;
      const ruleName = typeof rule.name === "string" ? rule.name : `rule-${i}`;
      const policy = policyName(name, ...(verifying > 1 || entries.length > 1 ? [ruleName] : []), ...(entries.length > 1 ? [String(j)] : []));
      documents.push({
        from,
        object: {
          apiVersion: POLICY_API_VERSION,
          kind: namespace !== undefined ? "NamespacedImagePolicy" : "ImagePolicy",
          metadata: { name: policy, ...(namespace !== undefined ? { namespace } : {}) },
          spec: { ...scope, ...converted },
        },
      });
    });
  });
  if (documents.length === 0 && verifying === 0) log.note("spec.rules", "no verifyImages rule: nothing to convert");
  return { documents, findings: log.findings };
}

/** One verifyImages entry as an ImagePolicy's spec (without its scope); undefined when it cannot be converted. */
function convertVerifyImages(entry: Json, at: string, log: FindingLog, action: "Enforce" | "Audit"): Json | undefined {
  const type = typeof entry.type === "string" ? entry.type : "Cosign";
  if (type !== "Cosign" && type !== "SigstoreBundle" && type !== "Notary") {
    log.weaker(`${at}.type`, `${type} signatures are not verified by Imprimatur yet: this entry is not converted, so the images it names are not verified`);
    return undefined;
  }
  const images = [...stringsOf(entry.imageReferences), ...stringsOf([entry.image])];
  if (images.length === 0) {
    log.weaker(`${at}.imageReferences`, "no image reference: this entry is not converted");
    return undefined;
  }
  if (entry.imageRegistryCredentials !== undefined)
    log.note(`${at}.imageRegistryCredentials`, "Imprimatur reads a pod's own pull secrets, then serve's --authfile: not carried over");
  if (entry.required === false) log.note(`${at}.required`, "false is not carried over: every image this rule names must be verified (stricter)");
  if (entry.validate !== undefined) log.weaker(`${at}.validate`, "deny conditions over the verified data are not carried over");
  const rule: Json = { action: "allow", images };
  const notary = type === "Notary";
  const attestors = entry.attestors === undefined ? [] : convertKyvernoAttestorSets(entry.attestors, `${at}.attestors`, log, { notary });
  if (attestors.length > 0) rule.attestors = attestors;
  const attestations: Json[] = [];
  listOf(entry.attestations).forEach((a, k) => {
    const aAt = `${at}.attestations[${k}]`;
    if (!isJson(a)) return;
    if (notary) return log.weaker(aAt, "attestations signed with Notation are not verified by Imprimatur: this attestation check is not converted");
    const predicateType = typeof a.predicateType === "string" ? a.predicateType : typeof a.type === "string" ? a.type : undefined;
    if (predicateType === undefined) return log.weaker(aAt, "no predicateType: this attestation check is not converted");
    const check: Json = { predicateType };
    if (a.attestors !== undefined) {
      const sets = convertKyvernoAttestorSets(a.attestors, `${aAt}.attestors`, log);
      if (sets.length > 0) check.attestors = sets;
    }
    if (a.conditions !== undefined) check.conditions = a.conditions;
    attestations.push(check);
  });
  if (attestations.length > 0) rule.attestations = attestations;
  if (typeof entry.repository === "string" && entry.repository !== "") rule.repository = entry.repository;
  // Kyverno's defaults, said explicitly: a reader of the result need not know either tool's.
  rule.digestMutate = entry.mutateDigest !== false;
  rule.digestVerify = entry.verifyDigest !== false;
  const skipped = stringsOf(entry.skipImageReferences);
  return {
    rules: [...(skipped.length > 0 ? [{ action: "allow", images: skipped }] : []), rule],
    default: "allow",
    validationActions: [action === "Enforce" ? "Deny" : "Audit"],
  };
}

/** Kyverno's failure action, in either spelling (Enforce/enforce, Audit/audit). */
function failureAction(v: unknown): "Enforce" | "Audit" | undefined {
  if (typeof v !== "string") return undefined;
  const lower = v.toLowerCase();
  return lower === "enforce" ? "Enforce" : lower === "audit" ? "Audit" : undefined;
}
