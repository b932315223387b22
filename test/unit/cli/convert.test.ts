// `imprimatur convert`, as a user migrating runs it: Kyverno ClusterPolicy/Policy verifyImages rules and Sigstore
// policy-controller ClusterImagePolicies of the kinds their documentation shows (written here anew from the
// fields the docs describe), converted, then judged with `imprimatur check` on the images the originals'
// semantics decide: images they name need verified signatures (offline: unverified), a tag under verifyDigest is
// denied, images they do not name and excluded namespaces are allowed, Audit and warn modes do not deny. What
// cannot be carried over is said per field, and a conversion that would admit more exits 1.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { parseAllDocuments } from "yaml";
import { imprimatur } from "../../support/cli-process.ts";
import { createRoot } from "../../support/notation/test-pki.ts";

let dir: string;
/** A CA certificate, as a Kyverno Notary attestor names it. */
let notaryCa: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-convert-"));
  notaryCa = (await createRoot({ subject: "C=US, ST=WA, O=Example, CN=Example Notation CA" })).pem.trim();
});
after(() => rm(dir, { recursive: true, force: true }));

const KEY = `-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8nXRh950IZbRj8Ra/N9sbqOPZrfM
5/KAQN0/KjHcorm/J5yctVd7iEcnessRQjU917hmKO6JWVGHpDguIyakZA==
-----END PUBLIC KEY-----`;
const indented = (text: string, spaces: number) => text.replace(/\n/g, `\n${" ".repeat(spaces)}`);
const DIGEST = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

let files = 0;
async function file(text: string): Promise<string> {
  const path = join(dir, `input-${files++}.yaml`);
  await writeFile(path, text);
  return path;
}

/** Converts `text`; the converted documents written to a file for check. */
async function convert(text: string) {
  const r = await imprimatur(["convert", "-f", await file(text)]);
  const documents = parseAllDocuments(r.stdout).map((d) => d.toJS() as Record<string, any>);
  const converted = await file(r.stdout);
  return { ...r, documents, converted };
}

/** `check` of one pod per image (in `namespace`, with its name label), as NAME → result line. */
async function judge(policies: string, images: Record<string, string>, namespace = "shop", extra: string[] = []): Promise<Record<string, string>> {
  const pods = Object.entries(images)
    .map(
      ([name, image]) => `apiVersion: v1\nkind: Pod\nmetadata: {name: ${name}, namespace: ${namespace}}\nspec:\n  containers: [{name: c, image: "${image}"}]\n`,
    )
    .join("---\n");
  const r = await imprimatur([
    "check",
    "--policies",
    policies,
    "-f",
    await file(pods),
    "--namespace-labels",
    `${namespace}:kubernetes.io/metadata.name=${namespace}`,
    ...extra,
    "-o",
    "json",
  ]);
  const results = (JSON.parse(r.stdout) as { results: Array<{ name: string; result: string }> }).results;
  return Object.fromEntries(results.map((x) => [x.name, x.result]));
}

test("Kyverno: a key and a keyless identity, one of them required (count 1), enforced outside kube-system; attestation conditions carried as they are", async () => {
  const r = await convert(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: verify-team-images}
spec:
  validationFailureAction: Enforce
  rules:
    - name: verify-signature
      match:
        any:
          - resources: {kinds: [Pod]}
      exclude:
        any:
          - resources: {namespaces: [kube-system]}
      verifyImages:
        - imageReferences: ["registry.example.com/team/*"]
          attestors:
            - count: 1
              entries:
                - keys:
                    publicKeys: |-
                      ${indented(KEY, 22)}
                - keyless:
                    subject: "https://github.com/example/*"
                    issuer: "https://token.actions.githubusercontent.com"
                    rekor: {url: https://rekor.sigstore.dev}
          attestations:
            - predicateType: https://slsa.dev/provenance/v0.2
              conditions:
                - all:
                    - key: "{{ builder.id }}"
                      operator: Equals
                      value: https://github.com/example/builder
`);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.documents.length, 1);
  const policy = r.documents[0]!;
  assert.equal(policy.kind, "ImagePolicy");
  assert.equal(policy.metadata.name, "verify-team-images");
  const rule = policy.spec.rules[0];
  assert.deepEqual(rule.attestors[0].count, 1);
  assert.deepEqual(
    rule.attestors[0].entries.map((e: Record<string, unknown>) => Object.keys(e)[0]),
    ["staticKey", "keyless"],
  );
  assert.deepEqual(rule.attestations[0].conditions[0].all[0], { key: "{{ builder.id }}", operator: "Equals", value: "https://github.com/example/builder" });
  assert.deepEqual([rule.digestMutate, rule.digestVerify], [true, true], "Kyverno's defaults, said");
  assert.deepEqual(policy.spec.validationActions, ["Deny"]);
  assert.match(r.stderr, /^1 object: 1 policy written; 0 weaker, 0 notes$/m);

  const images = { signed: `registry.example.com/team/app@${DIGEST}`, tagged: "registry.example.com/team/app:1.0", other: "docker.io/library/nginx:1.25" };
  assert.deepEqual(await judge(r.converted, images), { signed: "unverified", tagged: "denied", other: "allowed" });
  assert.deepEqual(await judge(r.converted, images, "kube-system"), { signed: "allowed", tagged: "allowed", other: "allowed" }, "kube-system is excluded");
});

test("Kyverno: Audit (the default action), skipImageReferences, mutateDigest and verifyDigest false", async () => {
  const r = await convert(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: audit-images}
spec:
  rules:
    - name: audit
      match: {any: [{resources: {kinds: [Pod]}}]}
      verifyImages:
        - imageReferences: ["registry.example.com/*"]
          skipImageReferences: ["registry.example.com/sandbox/*"]
          mutateDigest: false
          verifyDigest: false
          attestors:
            - entries:
                - keys:
                    publicKeys: |-
                      ${indented(KEY, 22)}
`);
  assert.equal(r.code, 0, r.stderr);
  const spec = r.documents[0]!.spec;
  assert.deepEqual(spec.validationActions, ["Audit"]);
  assert.deepEqual(spec.rules[0], { action: "allow", images: ["registry.example.com/sandbox/*"] });
  assert.deepEqual([spec.rules[1].digestMutate, spec.rules[1].digestVerify], [false, false]);
  const judged = await judge(r.converted, { sandbox: "registry.example.com/sandbox/tool:1", tagged: "registry.example.com/app:1.0" });
  assert.equal(judged.sandbox, "allowed", "skipped images are not verified");
  assert.notEqual(judged.tagged, "denied", "Audit never denies, and a tag is verified where it points (verifyDigest false)");
});

test("Kyverno: a namespaced Policy becomes a NamespacedImagePolicy of its namespace, judging its pods only", async () => {
  const r = await convert(`apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: team-signed, namespace: shop}
spec:
  validationFailureAction: Enforce
  rules:
    - name: team
      match: {any: [{resources: {kinds: [Pod], namespaces: [shop]}}]}
      verifyImages:
        - imageReferences: ["registry.example.com/*"]
          attestors: [{entries: [{keys: {secret: {name: cosign-key, namespace: shop}}}]}]
`);
  assert.equal(r.code, 0, r.stderr);
  const policy = r.documents[0]!;
  assert.equal(policy.kind, "NamespacedImagePolicy");
  assert.equal(policy.metadata.namespace, "shop");
  assert.equal(policy.spec.rules[0].attestors[0].entries[0].staticKey.keyRef, "k8s://shop/cosign-key");
  const image = { app: `registry.example.com/app@${DIGEST}` };
  assert.deepEqual(await judge(r.converted, image, "shop"), { app: "unverified" });
  assert.deepEqual(await judge(r.converted, image, "elsewhere"), { app: "allowed" });
});

test("Kyverno: what Imprimatur cannot verify is said per field; a requirement dropped exits 1 (weaker), one alternative fewer does not", async () => {
  const r = await convert(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: mixed}
spec:
  validationFailureAction: Enforce
  rules:
    - name: all-of-them
      match: {any: [{resources: {kinds: [Pod]}}]}
      verifyImages:
        - imageReferences: ["registry.example.com/a/*"]
          attestors:
            - entries:
                - keys:
                    publicKeys: |-
                      ${indented(KEY, 22)}
                - certificates: {cert: "-----BEGIN CERTIFICATE-----"}
        - type: Notary
          imageReferences: ["registry.example.com/b/*"]
          attestors:
            - entries:
                - certificates:
                    cert: |-
                      ${indented(notaryCa, 22)}
          attestations: [{type: "sbom/cyclone-dx", attestors: [{entries: [{certificates: {cert: x}}]}]}]
    - name: any-of-them
      match: {any: [{resources: {kinds: [Pod]}}]}
      verifyImages:
        - imageReferences: ["registry.example.com/c/*"]
          attestors:
            - count: 1
              entries:
                - keys: {kms: "gcpkms://projects/p/locations/l/keyRings/r/cryptoKeys/k"}
                - keyless: {subject: "release@example.com", issuer: "https://accounts.google.com"}
    - name: not-images
      match: {any: [{resources: {kinds: [Pod]}}]}
      validate: {message: "labels", pattern: {metadata: {labels: {app: "?*"}}}}
`);
  assert.equal(r.code, 1, r.stderr);
  const lines = r.stderr.trimEnd().split("\n");
  const source = `${join(dir, `input-${files - 2}.yaml`)} ClusterPolicy/mixed`;
  assert.deepEqual(lines.slice(0, -1), [
    `${source} spec.rules[0].verifyImages[0].attestors[0].entries[1].certificates: weaker: certificate attestors are not verified by Imprimatur: the entry is left out, and this set needs all of its entries: one requirement fewer`,
    `${source} spec.rules[0].verifyImages[1].attestors[0].entries[0].certificates: note: a notary entry trusting these certificates, any signing identity under them, at Notation's strict level`,
    `${source} spec.rules[0].verifyImages[1].attestations[0]: weaker: attestations signed with Notation are not verified by Imprimatur: this attestation check is not converted`,
    `${source} spec.rules[1].verifyImages[0].attestors[0].entries[0].keys.kms: note: KMS keys are not read by Imprimatur: the entry is left out (export the public key, and give it as publicKeys); the set still needs 1 of the entries left (stricter)`,
    `${source} spec.rules[2]: note: rule not-images does not verify images: not converted (keep it in Kyverno, or write a PodRestriction)`,
  ]);
  assert.equal(lines.at(-1), "1 object: 3 policies written; 2 weaker, 3 notes");
  assert.deepEqual(
    r.documents.map((d) => d.metadata.name),
    ["mixed-all-of-them-0", "mixed-all-of-them-1", "mixed-any-of-them"],
  );
  // The Notary entry: its certificate as the notary entry's trust store.
  assert.deepEqual(r.documents[1]!.spec.rules.at(-1).attestors, [{ entries: [{ notary: { certs: notaryCa } }] }]);
  // Each document says where it came from and what was left out, in comments above it.
  assert.match(r.stdout, /^# Converted by imprimatur convert from ClusterPolicy\/mixed \(kyverno\.io\/v1\)\.\n# WEAKER: spec\.rules\[0\]\.verifyImages\[0\]/m);
});

test("policy-controller: any authority of a ClusterImagePolicy satisfies it; only namespaces that opt in are judged; warn mode warns", async () => {
  const r = await convert(`apiVersion: policy.sigstore.dev/v1beta1
kind: ClusterImagePolicy
metadata: {name: release-signed}
spec:
  images:
    - glob: "registry.example.com/release/**"
  authorities:
    - key:
        data: |
          ${indented(KEY, 10)}
    - keyless:
        url: https://fulcio.sigstore.dev
        identities:
          - issuer: https://accounts.google.com
            subject: release@example.com
          - issuerRegExp: "^https://token\\\\.actions\\\\.githubusercontent\\\\.com$"
            subjectRegExp: "^https://github\\\\.com/example/"
`);
  assert.equal(r.code, 0, r.stderr);
  const spec = r.documents[0]!.spec;
  assert.deepEqual(spec.namespaceSelector, { matchLabels: { "policy.sigstore.dev/include": "true" } });
  assert.deepEqual(spec.rules[0].images, ["registry.example.com/release/*"]);
  assert.equal(spec.rules[0].attestors[0].count, 1);
  assert.equal(spec.rules[0].attestors[0].entries.length, 3, "the key and both identities, any one of them");
  assert.equal(spec.rules[0].digestMutate, true);
  const images = { release: `registry.example.com/release/app@${DIGEST}`, other: "docker.io/library/nginx:1.25" };
  assert.deepEqual(await judge(r.converted, images, "shop", ["--namespace-labels", "shop:policy.sigstore.dev/include=true"]), {
    release: "unverified",
    other: "allowed",
  });
  assert.deepEqual(await judge(r.converted, images, "shop"), { release: "allowed", other: "allowed" }, "a namespace that does not opt in");

  const warn = await convert(`apiVersion: policy.sigstore.dev/v1beta1
kind: ClusterImagePolicy
metadata: {name: release-warn}
spec:
  mode: warn
  images: [{glob: "registry.example.com/release/*"}]
  authorities:
    - key: {data: "${KEY.replace(/\n/g, "\\n")}"}
      attestations:
        - name: must-have-slsa
          predicateType: slsaprovenance1
          policy: {type: cue, data: "predicateType: \\"https://slsa.dev/provenance/v1\\""}
`);
  assert.equal(warn.code, 1, "the CUE policy over the attestation is dropped: weaker");
  assert.match(
    warn.stderr,
    /spec\.authorities\[0\]\.attestations\[0\]\.policy: weaker: a CUE or Rego policy over the attestation's content is not carried over/,
  );
  assert.match(warn.stderr, /spec\.images\[0\]\.glob: note: Imprimatur's \* also matches "\/"/);
  const rule = warn.documents[0]!.spec.rules[0];
  assert.deepEqual(rule.attestations, [{ predicateType: "https://slsa.dev/provenance/v1" }], "cosign's short type, as its full URI");
  assert.deepEqual(warn.documents[0]!.spec.validationActions, ["Warn"]);
});

test("objects of other kinds are said and skipped; nothing to convert exits 2; -o json gives the documents and findings", async () => {
  const none = await imprimatur(["convert", "-f", await file("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /ConfigMap\/x: note: v1 ConfigMap is not a kind imprimatur convert reads/);
  const usage = await imprimatur(["convert"]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /give the policies to convert with -f FILE/);
  const json = await imprimatur([
    "convert",
    "-o",
    "json",
    "-f",
    await file(`apiVersion: policy.sigstore.dev/v1beta1
kind: ClusterImagePolicy
metadata: {name: pass-all}
spec:
  images: [{glob: "registry.example.com/public/*"}]
  authorities: [{static: {action: pass}}]
`),
  ]);
  assert.equal(json.code, 0, json.stderr);
  const out = JSON.parse(json.stdout) as { documents: Array<{ spec: { rules: unknown[] } }>; findings: unknown[] };
  assert.deepEqual(out.documents[0]!.spec.rules, [{ action: "allow", images: ["registry.example.com/public/*"] }], "a static pass allows unverified");
});

test("Kyverno ImageValidatingPolicy: each verifyImageSignatures or verifyAttestationSignatures validation of every image is a check; other CEL is named, weaker", async () => {
  const r = await convert(`apiVersion: policies.kyverno.io/v1alpha1
kind: ImageValidatingPolicy
metadata: {name: verify-release}
spec:
  validationActions: [Audit]
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchImageReferences:
    - glob: "registry.example.com/release/*"
  attestors:
    - name: releaseKey
      cosign:
        key:
          data: |
            ${indented(KEY, 12)}
    - name: ci
      cosign:
        keyless:
          identities:
            - {issuer: "https://token.actions.githubusercontent.com", subject: "https://github.com/example/app/.github/workflows/release.yml@refs/heads/main"}
        ctlog: {insecureIgnoreTlog: true}
  attestations:
    - name: provenance
      intoto: {type: https://slsa.dev/provenance/v1}
  validations:
    - expression: images.containers.map(image, verifyImageSignatures(image, [attestors.releaseKey, attestors.ci])).all(e, e > 0)
    - expression: images.containers.map(image, verifyAttestationSignatures(image, attestations.provenance, [attestors.ci])).all(e, e > 0)
    - expression: images.containers.map(image, extractPayload(image, attestations.provenance).predicate.buildDefinition.buildType == 'x').all(e, e)
`);
  assert.equal(r.code, 1, "the payload check is CEL over Kyverno's functions: weaker, said");
  assert.match(r.stderr, /spec\.validations\[2\]\.expression: weaker: not a verifyImageSignatures or verifyAttestationSignatures of every image/);
  const spec = r.documents[0]!.spec;
  const rule = spec.rules[0];
  assert.deepEqual(rule.attestors, [
    {
      count: 1,
      entries: [
        { staticKey: { key: `${KEY}\n` } },
        {
          keyless: {
            subject: "https://github.com/example/app/.github/workflows/release.yml@refs/heads/main",
            issuer: "https://token.actions.githubusercontent.com",
            ignoreTlog: true,
          },
        },
      ],
    },
  ]);
  assert.equal(rule.attestations[0].predicateType, "https://slsa.dev/provenance/v1");
  assert.equal(rule.attestations[0].attestors[0].entries.length, 1, "the attestation's own attestor");
  assert.deepEqual(spec.validationActions, ["Audit"]);
  assert.deepEqual(spec.matchConstraints.resourceRules[0].resources, ["pods"]);
  assert.doesNotMatch(r.stdout, /&a\d|\*a\d/, "no YAML aliases: each entry written out");
  const judged = await judge(r.converted, { release: `registry.example.com/release/app@${DIGEST}`, other: "docker.io/library/nginx:1.25" });
  assert.equal(judged.other, "allowed");
  assert.notEqual(judged.release, "denied", "Audit does not deny");
});

test("Kyverno ImageValidatingPolicy: a notary attestor is a notary entry (certs, tsaCerts); a Notation-signed attestation is said, not converted", async () => {
  const r = await convert(`apiVersion: policies.kyverno.io/v1alpha1
kind: ImageValidatingPolicy
metadata: {name: verify-notation}
spec:
  matchImageReferences:
    - glob: "registry.example.com/release/*"
  attestors:
    - name: notary
      notary:
        certs:
          value: |-
            ${indented(notaryCa, 12)}
        tsaCerts:
          value: |-
            ${indented(notaryCa, 12)}
    - name: releaseKey
      cosign:
        key:
          data: |
            ${indented(KEY, 12)}
  attestations:
    - name: sbom
      referrer: {type: sbom/cyclone-dx}
  validations:
    - expression: images.containers.map(image, verifyImageSignatures(image, [attestors.notary])).all(e, e > 0)
    - expression: images.containers.map(image, verifyAttestationSignatures(image, attestations.sbom, [attestors.notary, attestors.releaseKey])).all(e, e > 0)
`);
  assert.equal(r.code, 0, r.stderr);
  const rule = r.documents[0]!.spec.rules[0];
  assert.deepEqual(rule.attestors, [{ count: 1, entries: [{ notary: { certs: notaryCa, tsaCerts: notaryCa } }] }]);
  assert.deepEqual(rule.attestations[0].attestors, [{ count: 1, entries: [{ staticKey: { key: `${KEY}\n` } }] }]);
  assert.match(r.stderr, /spec\.validations\[1\]\.expression: note: attestors\.notary: attestations signed with Notation are not verified by Imprimatur/);
});
