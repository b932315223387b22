// Sigstore policy-controller's ClusterImagePolicy (policy.sigstore.dev/v1beta1, v1alpha1) as an ImagePolicy.
// policy-controller judges only namespaces labelled policy.sigstore.dev/include=true; there an image must pass every
// ClusterImagePolicy whose images it matches, and a policy passes when any one of its authorities is satisfied. So:
// the label becomes the namespaceSelector, the images one allow rule, and the authorities the entries of one
// attestor set with count 1. An authority with attestations is satisfied only when its own key or identity signed
// both: such a policy is converted when it has that one authority (its attestations verified by the same
// entries); the policies (CUE, Rego) over an attestation's content are not carried over.
import { FindingLog, identityFields, POLICY_API_VERSION, isJson, listOf, pemBlocks, policyName, type ConversionResult, type Json } from "./conversion.ts";

export const POLICY_CONTROLLER_API_VERSIONS = ["policy.sigstore.dev/v1beta1", "policy.sigstore.dev/v1alpha1"];

/** The namespace label policy-controller's webhook selects on. */
export const POLICY_CONTROLLER_INCLUDE_LABEL = "policy.sigstore.dev/include";

/** cosign's short predicate types (`cosign attest --type`), as policy-controller accepts them. */
const PREDICATE_TYPES: Record<string, string> = {
  custom: "https://cosign.sigstore.dev/attestation/v1",
  slsaprovenance: "https://slsa.dev/provenance/v0.2",
  slsaprovenance02: "https://slsa.dev/provenance/v0.2",
  slsaprovenance1: "https://slsa.dev/provenance/v1",
  link: "https://in-toto.io/Link/v1",
  spdx: "https://spdx.dev/Document",
  spdxjson: "https://spdx.dev/Document",
  cyclonedx: "https://cyclonedx.org/bom",
  vuln: "https://cosign.sigstore.dev/attestation/vuln/v1",
  openvex: "https://openvex.dev/ns",
};

/** Where policy-controller reads the Secrets of key.secretRef: its own namespace, by default cosign-system. */
const POLICY_CONTROLLER_NAMESPACE = "cosign-system";

export function convertClusterImagePolicy(object: Json, file: string): ConversionResult {
  const meta = isJson(object.metadata) ? object.metadata : {};
  const name = typeof meta.name === "string" ? meta.name : "";
  const log = new FindingLog(`${file} ClusterImagePolicy/${name}`);
  const spec = isJson(object.spec) ? object.spec : {};
  const images: string[] = [];
  listOf(spec.images).forEach((image, i) => {
    if (!isJson(image)) return;
    if (typeof image.glob === "string" && image.glob !== "") {
      // policy-controller's "*" stops at "/" and "**" does not; Imprimatur's "*" never stops.
      if (/(^|[^*])\*([^*]|$)/.test(image.glob))
        log.note(`spec.images[${i}].glob`, `Imprimatur's * also matches "/": the rule covers the repositories below too (stricter)`);
      images.push(image.glob.replace(/\*\*+/g, "*"));
    } else if (typeof image.regex === "string")
      log.weaker(`spec.images[${i}].regex`, "regular expressions over image names are not carried over: the images they name are not verified");
  });
  if (images.length === 0) {
    log.weaker("spec.images", "no glob: nothing to convert");
    return { documents: [], findings: log.findings };
  }
  if (spec.policy !== undefined) log.weaker("spec.policy", "a CUE or Rego policy over the verified data is not carried over");
  if (spec.match !== undefined) log.note("spec.match", "resource matches are not carried over: the policy judges every pod and template (stricter)");

  const authorities = listOf(spec.authorities);
  const entries: Json[] = [];
  let staticPass = false;
  let staticFail = false;
  const attestations: Json[] = [];
  let repository: string | undefined;
  authorities.forEach((authority, i) => {
    const at = `spec.authorities[${i}]`;
    if (!isJson(authority)) return;
    if (isJson(authority.static)) {
      if (authority.static.action === "pass") staticPass = true;
      else staticFail = true;
      return;
    }
    const converted = isJson(authority.key)
      ? keyEntries(authority.key, `${at}.key`, log)
      : isJson(authority.keyless)
        ? keylessEntries(authority.keyless, `${at}.keyless`, log)
        : [];
    if (!isJson(authority.key) && !isJson(authority.keyless))
      log.note(at, "an authority of an unknown kind: left out (one authority fewer that can satisfy the policy: stricter)");
    if (isJson(authority.ctlog) && authority.ctlog.url !== undefined)
      log.note(`${at}.ctlog`, "a private Rekor belongs in a TrustRoot (trustRoot: NAME); until then the public-good log is asked (stricter)");
    const source = listOf(authority.source).find(isJson);
    if (source && isJson(source) && typeof source.oci === "string") {
      if (repository !== undefined && repository !== source.oci) log.note(`${at}.source`, "one signature repository per rule: the first authority's is used");
      repository ??= source.oci;
      if (source.signaturePullSecrets !== undefined)
        log.note(`${at}.source[0].signaturePullSecrets`, "Imprimatur reads a pod's own pull secrets, then serve's --authfile: not carried over");
    }
    listOf(authority.attestations).forEach((a, k) => {
      const aAt = `${at}.attestations[${k}]`;
      if (!isJson(a) || typeof a.predicateType !== "string") return log.weaker(aAt, "no predicateType: not converted");
      if (authorities.length > 1)
        log.weaker(
          aAt,
          "attestations of one authority among several: not converted (Imprimatur's attestation checks name their own attestors; write them by hand)",
        );
      else attestations.push({ predicateType: PREDICATE_TYPES[a.predicateType] ?? a.predicateType });
      if (a.policy !== undefined)
        log.weaker(
          `${aAt}.policy`,
          "a CUE or Rego policy over the attestation's content is not carried over: any statement of this type signed by the authority passes",
        );
    });
    entries.push(...converted);
  });

  const rule: Json = { action: "allow", images };
  if (staticFail) rule.action = "deny";
  else if (!staticPass) {
    if (entries.length === 0) {
      log.weaker("spec.authorities", "no authority could be carried over: the images are not verified");
    } else {
      rule.attestors = [{ count: 1, entries }];
      if (attestations.length > 0) rule.attestations = attestations;
      // policy-controller's mutating webhook resolves tags to the digests it verified, as digestMutate does.
      rule.digestMutate = true;
    }
  }
  if (repository !== undefined && rule.action === "allow") rule.repository = repository;
  const mode = typeof spec.mode === "string" ? spec.mode : "enforce";
  return {
    documents: [
      {
        from: `ClusterImagePolicy/${name} (${object.apiVersion as string})`,
        object: {
          apiVersion: POLICY_API_VERSION,
          kind: "ImagePolicy",
          metadata: { name: policyName(name) },
          spec: {
            // policy-controller's webhook judges only the namespaces that opt in.
            namespaceSelector: { matchLabels: { [POLICY_CONTROLLER_INCLUDE_LABEL]: "true" } },
            rules: [rule],
            default: "allow",
            validationActions: [mode === "warn" ? "Warn" : "Deny"],
          },
        },
      },
    ],
    findings: log.findings,
  };
}

function keyEntries(key: Json, at: string, log: FindingLog): Json[] {
  if (key.kms !== undefined) {
    log.note(
      `${at}.kms`,
      "KMS keys are not read by Imprimatur: left out, one authority fewer that can satisfy the policy (stricter); export the public key, and give it as data",
    );
    return [];
  }
  if (typeof key.hashAlgorithm === "string" && key.hashAlgorithm !== "sha256")
    log.note(`${at}.hashAlgorithm`, `${key.hashAlgorithm}: Imprimatur verifies with the digest the key's type uses`);
  if (isJson(key.secretRef) && typeof key.secretRef.name === "string") {
    const given = typeof key.secretRef.namespace === "string" && key.secretRef.namespace !== "" ? key.secretRef.namespace : undefined;
    if (given === undefined)
      log.note(
        `${at}.secretRef`,
        `read from the namespace ${POLICY_CONTROLLER_NAMESPACE}, where policy-controller reads it: change the keyRef if yours runs elsewhere`,
      );
    return [{ staticKey: { keyRef: `k8s://${given ?? POLICY_CONTROLLER_NAMESPACE}/${key.secretRef.name}` } }];
  }
  const pems = typeof key.data === "string" ? pemBlocks(key.data) : [];
  if (pems.length === 0) {
    log.note(`${at}.data`, "no PEM public key: left out, one authority fewer that can satisfy the policy (stricter)");
    return [];
  }
  // Any of the authority's keys may have signed (the authorities' set counts one).
  return pems.map((pem) => ({ staticKey: { key: pem } }));
}

function keylessEntries(keyless: Json, at: string, log: FindingLog): Json[] {
  if (keyless["ca-cert"] !== undefined || keyless.trustRootRef !== undefined)
    log.note(at, "a private Fulcio root belongs in a TrustRoot (trustRoot: NAME on each entry); until then the public-good root is used (stricter)");
  if (keyless.insecureIgnoreSCT === true) log.note(`${at}.insecureIgnoreSCT`, "Imprimatur always checks a Fulcio certificate's SCT: stricter");
  const identities = listOf(keyless.identities).filter(isJson);
  if (identities.length === 0) {
    log.note(`${at}.identities`, 'no identity: any certificate of the root is accepted, said so here (subject and issuer "*")');
    return [{ keyless: { subject: "*", issuer: "*" } }];
  }
  return identities.map((identity) => ({ keyless: identityFields(identity) }));
}
