// Kyverno's ImageValidatingPolicy (and NamespacedImageValidatingPolicy), policies.kyverno.io, as an ImagePolicy.
// Its checks are CEL validations that call the verification functions with named attestors and attestations:
//   images.containers.map(image, verifyImageSignatures(image, [attestors.a, attestors.b])).all(e, e > 0)
//   images.containers.map(image, verifyAttestationSignatures(image, attestations.p, [attestors.a])).all(e, e > 0)
// A call counts the attestors that verified, and `e > 0` wants one of them: each such validation becomes one set of
// entries with `count: 1` (signatures) or an attestation check (attestations). Any other validation is CEL over
// Kyverno's own functions and data, which Imprimatur does not run: it is named, weaker, and left out.
import { FindingLog, identityFields, POLICY_API_VERSION, isJson, listOf, pemBlocks, policyName, type ConversionResult, type Json } from "./conversion.ts";

export const IMAGE_VALIDATING_POLICY_API_VERSIONS = ["policies.kyverno.io/v1alpha1", "policies.kyverno.io/v1beta1", "policies.kyverno.io/v1"];
export const IMAGE_VALIDATING_POLICY_KINDS = ["ImageValidatingPolicy", "NamespacedImageValidatingPolicy"];

/** `images.<list>.map(image, CALL).all(e, e > 0)`, spaced freely; CALL captured. */
const ALL_VERIFIED = /^\s*images\.\w+\.map\(\s*image\s*,\s*(verify(?:Image|Attestation)Signatures\([^()]*\))\s*\)\s*\.all\(\s*(\w+)\s*,\s*\2\s*>\s*0\s*\)\s*$/;
const SIGNATURES_CALL = /^verifyImageSignatures\(\s*image\s*,\s*\[([^\]]*)\]\s*\)$/;
const ATTESTATIONS_CALL = /^verifyAttestationSignatures\(\s*image\s*,\s*attestations\.(\w+)\s*,\s*\[([^\]]*)\]\s*\)$/;

export function convertImageValidatingPolicy(object: Json, file: string): ConversionResult {
  const kind = object.kind as string;
  const meta = isJson(object.metadata) ? object.metadata : {};
  const name = typeof meta.name === "string" ? meta.name : "";
  const namespaced = kind === "NamespacedImageValidatingPolicy";
  const namespace = namespaced ? (typeof meta.namespace === "string" && meta.namespace !== "" ? meta.namespace : "default") : undefined;
  const log = new FindingLog(`${file} ${kind}/${name}`);
  const spec = isJson(object.spec) ? object.spec : {};

  const images: string[] = [];
  listOf(spec.matchImageReferences).forEach((m, i) => {
    if (!isJson(m)) return;
    if (typeof m.glob === "string" && m.glob !== "") images.push(m.glob);
    else if (m.expression !== undefined)
      log.weaker(`spec.matchImageReferences[${i}].expression`, "images matched by a CEL expression are not carried over: they are not verified");
  });
  if (images.length === 0) {
    log.weaker("spec.matchImageReferences", "no glob: nothing to convert");
    return { documents: [], findings: log.findings };
  }
  if (spec.images !== undefined)
    log.weaker(
      "spec.images",
      "custom image extractors are not carried over: Imprimatur verifies the images of pods and templates (and the imagePaths you declare)",
    );
  for (const field of ["variables", "auditAnnotations"]) if (spec[field] !== undefined) log.note(`spec.${field}`, "not carried over");
  for (const field of ["failurePolicy", "webhookConfiguration", "credentials", "evaluation", "autogen"])
    if (spec[field] !== undefined)
      log.note(`spec.${field}`, "not carried over (serve's flags, its ServerConfig and the pods' pull secrets decide this for every policy)");

  // The named attestors and attestations, converted once each.
  const attestors = new Map<string, Json[] | undefined>();
  listOf(spec.attestors).forEach((a, i) => {
    if (isJson(a) && typeof a.name === "string") attestors.set(a.name, attestorEntries(a, `spec.attestors[${i}]`, log));
  });
  const attestationTypes = new Map<string, string>();
  listOf(spec.attestations).forEach((a) => {
    if (!isJson(a) || typeof a.name !== "string") return;
    const type = isJson(a.intoto) ? a.intoto.type : isJson(a.referrer) ? a.referrer.type : undefined;
    if (typeof type === "string") attestationTypes.set(a.name, type);
  });

  const sets: Json[] = [];
  const checks: Json[] = [];
  let repository: string | undefined;
  listOf(spec.validations).forEach((v, i) => {
    const at = `spec.validations[${i}]`;
    const expression = isJson(v) && typeof v.expression === "string" ? v.expression : "";
    const call = ALL_VERIFIED.exec(expression)?.[1];
    const signatures = call ? SIGNATURES_CALL.exec(call) : null;
    const attestation = call ? ATTESTATIONS_CALL.exec(call) : null;
    if (!signatures && !attestation)
      return log.weaker(
        `${at}.expression`,
        "not a verifyImageSignatures or verifyAttestationSignatures of every image: this CEL validation is not carried over",
      );
    const names = (signatures ? signatures[1]! : attestation![2]!)
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
    const entries: Json[] = [];
    for (const ref of names) {
      const n = /^attestors\.(\w+)$/.exec(ref)?.[1];
      const converted = n === undefined ? undefined : attestors.get(n);
      // Attestations keep Sigstore signers: a Notation-signed attestation is not verified by Imprimatur.
      if (converted && attestation && converted.some((e) => e.notary !== undefined))
        log.note(
          `${at}.expression`,
          `${ref}: attestations signed with Notation are not verified by Imprimatur; one fewer attestor that can satisfy this check (stricter)`,
        );
      else if (converted) entries.push(...converted);
      else log.note(`${at}.expression`, `${ref}: not an attestor that could be carried over; one fewer that can satisfy this check (stricter)`);
    }
    if (entries.length === 0) return log.weaker(`${at}.expression`, "none of the attestors it names could be carried over: this check is left out");
    const set = { count: 1, entries };
    if (signatures) sets.push(set);
    else {
      const type = attestationTypes.get(attestation![1]!);
      if (type === undefined) return log.weaker(`${at}.expression`, `attestations.${attestation![1]} has no type: this check is left out`);
      checks.push({ predicateType: type, attestors: [set] });
    }
  });
  listOf(spec.attestors).forEach((a) => {
    if (isJson(a) && isJson(a.cosign) && isJson(a.cosign.source) && typeof a.cosign.source.repository === "string") repository ??= a.cosign.source.repository;
  });

  const config = isJson(spec.validationConfigurations) ? spec.validationConfigurations : {};
  if (config.required === false)
    log.note("spec.validationConfigurations.required", "false is not carried over: every image this policy names must be verified (stricter)");
  const rule: Json = { action: "allow", images };
  if (sets.length > 0) rule.attestors = sets;
  if (checks.length > 0) rule.attestations = checks;
  if (repository !== undefined) rule.repository = repository;
  rule.digestMutate = config.mutateDigest !== false;
  rule.digestVerify = config.verifyDigest !== false;
  const actions = listOf(spec.validationActions).filter((a): a is string => a === "Deny" || a === "Warn" || a === "Audit");
  const out: Json = { rules: [rule], default: "allow", validationActions: actions.length > 0 ? actions : ["Deny"] };
  if (isJson(spec.matchConstraints)) {
    const constraints: Json = {};
    for (const field of ["resourceRules", "excludeResourceRules", "namespaceSelector", "objectSelector"] as const)
      if (spec.matchConstraints[field] !== undefined) constraints[field] = spec.matchConstraints[field];
    for (const field of Object.keys(spec.matchConstraints))
      if (!(field in constraints) && field !== "matchPolicy") log.note(`spec.matchConstraints.${field}`, "not carried over (stricter)");
    if (Object.keys(constraints).length > 0) out.matchConstraints = constraints;
  }
  if (spec.matchConditions !== undefined) out.matchConditions = spec.matchConditions;
  return {
    documents: [
      {
        from: `${kind}/${name} (${object.apiVersion as string})`,
        object: {
          apiVersion: POLICY_API_VERSION,
          kind: namespaced ? "NamespacedImagePolicy" : "ImagePolicy",
          metadata: { name: policyName(name), ...(namespace !== undefined ? { namespace } : {}) },
          spec: out,
        },
      },
    ],
    findings: log.findings,
  };
}

/**
 * A notary attestor: `certs` (the certificates signatures must chain to) and `tsaCerts` (the time-stamping
 * authorities' roots), each a value or a CEL expression; any signing identity, at Notation's strict level, as
 * Kyverno verifies them.
 */
function notaryEntries(notary: unknown, at: string, log: FindingLog): Json[] | undefined {
  const spec = isJson(notary) ? notary : {};
  const value = (field: "certs" | "tsaCerts"): string | undefined => {
    const given = spec[field];
    if (typeof given === "string") return given;
    if (!isJson(given)) return undefined;
    if (given.expression !== undefined) log.note(`${at}.${field}.expression`, "certificates from a CEL expression are not read by Imprimatur");
    return typeof given.value === "string" ? given.value : undefined;
  };
  const certs = value("certs");
  if (certs === undefined || certs.trim() === "") {
    log.note(`${at}.certs`, "no certificates given as a value: a check that names this attestor has one fewer way to pass");
    return undefined;
  }
  const tsaCerts = value("tsaCerts");
  return [{ notary: { certs, ...(tsaCerts !== undefined && tsaCerts.trim() !== "" ? { tsaCerts } : {}) } }];
}

/** One named attestor's entries (any of them satisfies it); undefined when none can be carried over. */
function attestorEntries(attestor: Json, at: string, log: FindingLog): Json[] | undefined {
  if (attestor.notary !== undefined) return notaryEntries(attestor.notary, `${at}.notary`, log);
  const cosign = isJson(attestor.cosign) ? attestor.cosign : undefined;
  if (!cosign) return undefined;
  const ctlog = isJson(cosign.ctlog) ? cosign.ctlog : {};
  const tlog = ctlog.insecureIgnoreTlog === true ? { ignoreTlog: true } : {};
  for (const field of ["url", "rekorPubKey", "ctLogPubKey", "tsaCertChain"])
    if (ctlog[field] !== undefined)
      log.note(
        `${at}.cosign.ctlog.${field}`,
        "a private Rekor, CT log or timestamp authority belongs in a TrustRoot (trustRoot: NAME); until then the public-good one is used (stricter)",
      );
  if (ctlog.insecureIgnoreSCT === true) log.note(`${at}.cosign.ctlog.insecureIgnoreSCT`, "Imprimatur always checks a Fulcio certificate's SCT: stricter");
  if (cosign.tuf !== undefined)
    log.note(
      `${at}.cosign.tuf`,
      "a private Sigstore root belongs in a TrustRoot (imprimatur trust-root update makes one from TUF); until then the public-good root is used (stricter)",
    );
  if (cosign.annotations !== undefined) log.weaker(`${at}.cosign.annotations`, "the annotations a signature must carry are not checked by Imprimatur");
  if (cosign.certificate !== undefined) {
    log.note(`${at}.cosign.certificate`, "certificate attestors are not verified by Imprimatur: a check that names this attestor has one fewer way to pass");
    return undefined;
  }
  if (isJson(cosign.key)) {
    const key = cosign.key;
    if (key.kms !== undefined || key.expression !== undefined) {
      log.note(`${at}.cosign.key`, "KMS keys and keys from CEL are not read by Imprimatur: a check that names this attestor has one fewer way to pass");
      return undefined;
    }
    const pems = typeof key.data === "string" ? pemBlocks(key.data) : [];
    if (pems.length === 0) return undefined;
    return pems.map((pem) => ({ staticKey: { key: pem, ...tlog } }));
  }
  if (isJson(cosign.keyless)) {
    if (cosign.keyless.roots !== undefined)
      log.note(
        `${at}.cosign.keyless.roots`,
        "a custom Fulcio root belongs in a TrustRoot (trustRoot: NAME); until then the public-good root is used (stricter)",
      );
    const identities = listOf(cosign.keyless.identities).filter(isJson);
    return identities.map((identity) => ({ keyless: { ...identityFields(identity), ...tlog } }));
  }
  return undefined;
}
