// Pod Security Admission's PodSecurityConfiguration, read as PSA reads it (k8s.io/pod-security-admission
// admission/api: the v1, v1beta1 and v1alpha1 types; v1/defaults.go: unset levels privileged, versions latest;
// validation/validation.go: levels, versions, namespace and RuntimeClass names, duplicates), alone or embedded in
// kube-apiserver's AdmissionConfiguration. Every problem is reported with its field and line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError } from "../../../src/config/config-error.ts";
import { loadPodSecurityConfiguration, podSecurityConfigurationOfText } from "../../../src/config/pod-security-config.ts";
import { DEFAULT_POD_SECURITY_CONFIG, parsePodSecurityConfiguration } from "../../../src/core/pod-security/psa-config.ts";
import { formatLevelVersion } from "../../../src/core/pod-security/psa-labels.ts";

const FULL = `apiVersion: pod-security.admission.config.k8s.io/v1
kind: PodSecurityConfiguration
defaults:
  enforce: baseline
  enforce-version: v1.30
  audit: restricted
  audit-version: latest
  warn: restricted
exemptions:
  usernames: [system:serviceaccount:kube-system:replicaset-controller]
  runtimeClasses: [kata.example.com]
  namespaces: [kube-system]
`;

function problemsOf(text: string): Array<{ line?: number; path?: string; message: string }> {
  try {
    podSecurityConfigurationOfText(text, "psa.yaml");
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    assert.equal(e.code, "invalid-config");
    return e.problems.map((p) => ({ ...(p.line !== undefined ? { line: p.line } : {}), ...(p.path ? { path: p.path } : {}), message: p.message }));
  }
  assert.fail("expected the configuration to be refused");
}

test("a full PodSecurityConfiguration, in each API version PSA reads", () => {
  for (const version of ["v1", "v1beta1", "v1alpha1"]) {
    const config = podSecurityConfigurationOfText(FULL.replace("/v1\n", `/${version}\n`), "psa.yaml");
    assert.equal(formatLevelVersion(config.defaults.enforce), "baseline:v1.30");
    assert.equal(formatLevelVersion(config.defaults.audit), "restricted:latest");
    assert.equal(formatLevelVersion(config.defaults.warn), "restricted:latest");
    assert.deepEqual(config.exemptions, {
      usernames: ["system:serviceaccount:kube-system:replicaset-controller"],
      runtimeClasses: ["kata.example.com"],
      namespaces: ["kube-system"],
    });
  }
});

test("PSA's defaulting: what is unset or empty is privileged at latest, and nothing is exempt", () => {
  const config = podSecurityConfigurationOfText(
    "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults:\n  warn: ''\n",
    "psa.yaml",
  );
  for (const mode of ["enforce", "audit", "warn"] as const) assert.equal(formatLevelVersion(config.defaults[mode]), "privileged:latest");
  assert.deepEqual(config.exemptions, { usernames: [], namespaces: [], runtimeClasses: [] });
});

test("embedded in kube-apiserver's AdmissionConfiguration, as the PodSecurity plugin's configuration", () => {
  const embedded = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: EventRateLimit
    path: eventconfig.yaml
  - name: PodSecurity
    configuration:
${FULL.replace(/^/gm, "      ").trimEnd()}
`;
  const config = podSecurityConfigurationOfText(embedded, "admission.yaml");
  assert.equal(formatLevelVersion(config.defaults.enforce), "baseline:v1.30");
  assert.deepEqual(config.exemptions.namespaces, ["kube-system"]);
  assert.deepEqual(problemsOf(embedded.replace("      defaults:", "      defualts:")), [
    { line: 10, path: "plugins[1].configuration.defualts", message: 'unknown field; did you mean "defaults"?' },
  ]);
  assert.deepEqual(problemsOf("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n  - name: PodSecurity\n    path: psa.yaml\n"), [
    { line: 5, path: "plugins[0].path", message: "a configuration in another file is not read from here; give that file itself, or embed the configuration" },
  ]);
  assert.deepEqual(problemsOf("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: []\n"), [
    { line: 3, path: "plugins", message: "has no plugin named PodSecurity" },
  ]);
});

test("each refused value, with its field and line", () => {
  const text = `apiVersion: pod-security.admission.config.k8s.io/v2
kind: PodSecurityConfig
defaults:
  enforce: strict
  enforce-version: "1.25"
  audit: Restricted
  warn-version: v1.025
  warm: restricted
exemptions:
  usernames: ["", alice, alice]
  namespaces: [Kube_System, ok, ok]
  runtimeClasses: [kata.example.com, "-bad"]
`;
  assert.deepEqual(problemsOf(text), [
    {
      line: 1,
      path: "apiVersion",
      message:
        "must be one of pod-security.admission.config.k8s.io/v1, pod-security.admission.config.k8s.io/v1beta1, pod-security.admission.config.k8s.io/v1alpha1",
    },
    { line: 2, path: "kind", message: 'must be "PodSecurityConfiguration"' },
    { line: 4, path: "defaults.enforce", message: 'must be one of privileged, baseline, restricted, got "strict"' },
    { line: 5, path: "defaults.enforce-version", message: 'must be "latest" or "v1.x", got "1.25"' },
    { line: 6, path: "defaults.audit", message: 'must be one of privileged, baseline, restricted, got "Restricted"' },
    { line: 7, path: "defaults.warn-version", message: 'must be "latest" or "v1.x", got "v1.025"' },
    { line: 8, path: "defaults.warm", message: 'unknown field; did you mean "warn"?' },
    { line: 10, path: "exemptions.usernames[0]", message: "must be a non-empty string" },
    { line: 10, path: "exemptions.usernames[2]", message: 'duplicate "alice"' },
    {
      line: 11,
      path: "exemptions.namespaces[0]",
      message: "must be a namespace name (lowercase letters, digits and '-', at most 63 characters), got \"Kube_System\"",
    },
    { line: 11, path: "exemptions.namespaces[2]", message: 'duplicate "ok"' },
    { line: 12, path: "exemptions.runtimeClasses[1]", message: 'must be a RuntimeClass name (a lowercase DNS subdomain, at most 253 characters), got "-bad"' },
  ]);
});

test("wrong shapes are refused, not ignored", () => {
  assert.deepEqual(problemsOf("- a\n"), [{ line: 1, message: "must be a PodSecurityConfiguration or an AdmissionConfiguration (a YAML mapping)" }]);
  assert.deepEqual(
    problemsOf(
      "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\ndefaults: restricted\nexemptions:\n  namespaces: kube-system\n",
    ),
    [
      { line: 3, path: "defaults", message: "must be a mapping of enforce, enforce-version, audit, audit-version, warn, warn-version" },
      { line: 5, path: "exemptions.namespaces", message: "must be a list of names" },
    ],
  );
});

test("from a file; a missing file is unreadable", async () => {
  const dir = await mkdtemp(join(tmpdir(), "psa-config-"));
  try {
    await writeFile(join(dir, "psa.yaml"), FULL);
    assert.equal(formatLevelVersion((await loadPodSecurityConfiguration(join(dir, "psa.yaml"))).defaults.enforce), "baseline:v1.30");
    await assert.rejects(loadPodSecurityConfiguration(join(dir, "missing.yaml")), (e) => e instanceof ConfigError && e.code === "unreadable");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

const PSA_HEAD = "apiVersion: pod-security.admission.config.k8s.io/v1\nkind: PodSecurityConfiguration\n";

test("YAML nulls and empty strings are unset, as PSA's defaulting reads them", () => {
  const config = podSecurityConfigurationOfText(
    `${PSA_HEAD}defaults:\n  enforce: ~\n  enforce-version: ~\n  audit: restricted\n  audit-version: ''\nexemptions:\n  namespaces: ~\n  usernames: [ci]\n`,
    "psa.yaml",
  );
  assert.equal(formatLevelVersion(config.defaults.enforce), "privileged:latest");
  assert.equal(formatLevelVersion(config.defaults.audit), "restricted:latest");
  assert.deepEqual(config.exemptions, { usernames: ["ci"], namespaces: [], runtimeClasses: [] });
  const empty = podSecurityConfigurationOfText(`${PSA_HEAD}defaults: ~\nexemptions: ~\n`, "psa.yaml");
  assert.deepEqual(empty, DEFAULT_POD_SECURITY_CONFIG);
});

test("without a configuration every mode is privileged at latest and nothing is exempt", () => {
  for (const mode of ["enforce", "audit", "warn"] as const) assert.equal(formatLevelVersion(DEFAULT_POD_SECURITY_CONFIG.defaults[mode]), "privileged:latest");
  assert.deepEqual(DEFAULT_POD_SECURITY_CONFIG.exemptions, { usernames: [], namespaces: [], runtimeClasses: [] });
});

test("a version or level that is not a string is refused, even when it prints as a valid one", () => {
  assert.deepEqual(problemsOf(`${PSA_HEAD}defaults:\n  enforce: [baseline]\n  enforce-version: [v1.25]\n  warn-version: 25\n`), [
    { line: 4, path: "defaults.enforce", message: 'must be one of privileged, baseline, restricted, got ["baseline"]' },
    { line: 5, path: "defaults.enforce-version", message: 'must be "latest" or "v1.x", got ["v1.25"]' },
    { line: 6, path: "defaults.warn-version", message: 'must be "latest" or "v1.x", got 25' },
  ]);
});

test("exempt names: namespaces are DNS labels of at most 63 characters, runtime classes DNS subdomains of at most 253", () => {
  const ok63 = "n".repeat(63);
  const ok253 = `${"r".repeat(63)}.${"r".repeat(63)}.${"r".repeat(63)}.${"r".repeat(61)}`;
  assert.equal(ok253.length, 253);
  const config = podSecurityConfigurationOfText(
    `${PSA_HEAD}exemptions:\n  namespaces: [a, a-1, ${ok63}]\n  runtimeClasses: [a, a.b, kata-2.example.com, ${ok253}]\n  usernames: [" "]\n`,
    "psa.yaml",
  );
  assert.deepEqual(config.exemptions, { namespaces: ["a", "a-1", ok63], runtimeClasses: ["a", "a.b", "kata-2.example.com", ok253], usernames: [" "] });
  const ns = (name: string) => `must be a namespace name (lowercase letters, digits and '-', at most 63 characters), got ${JSON.stringify(name)}`;
  const rc = (name: string) => `must be a RuntimeClass name (a lowercase DNS subdomain, at most 253 characters), got ${JSON.stringify(name)}`;
  assert.deepEqual(
    problemsOf(
      `${PSA_HEAD}exemptions:\n  namespaces: [${ok63}n, kube-system-, a.b, "ns_"]\n  runtimeClasses: [${ok253}r, kata., a.b-, "kata_", ".a"]\n  usernames: [5, ~]\n`,
    ),
    [
      { line: 4, path: "exemptions.namespaces[0]", message: ns(`${ok63}n`) },
      { line: 4, path: "exemptions.namespaces[1]", message: ns("kube-system-") },
      { line: 4, path: "exemptions.namespaces[2]", message: ns("a.b") },
      { line: 4, path: "exemptions.namespaces[3]", message: ns("ns_") },
      { line: 5, path: "exemptions.runtimeClasses[0]", message: rc(`${ok253}r`) },
      { line: 5, path: "exemptions.runtimeClasses[1]", message: rc("kata.") },
      { line: 5, path: "exemptions.runtimeClasses[2]", message: rc("a.b-") },
      { line: 5, path: "exemptions.runtimeClasses[3]", message: rc("kata_") },
      { line: 5, path: "exemptions.runtimeClasses[4]", message: rc(".a") },
      { line: 6, path: "exemptions.usernames[0]", message: "must be a non-empty string" },
      { line: 6, path: "exemptions.usernames[1]", message: "must be a non-empty string" },
    ],
  );
  assert.deepEqual(problemsOf(`${PSA_HEAD}exemptions: [kube-system]\n`), [
    { line: 3, path: "exemptions", message: "must be a mapping of usernames, namespaces, runtimeClasses" },
  ]);
  assert.deepEqual(problemsOf(`${PSA_HEAD}exemptions:\n  namespace: [kube-system]\n`), [
    { line: 4, path: "exemptions.namespace", message: 'unknown field; did you mean "namespaces"?' },
  ]);
});

test("an AdmissionConfiguration: its apiVersions, and a PodSecurity plugin that is missing, twice, or not embedded", () => {
  const admission = (apiVersion: string, plugins: string) => `apiVersion: ${apiVersion}\nkind: AdmissionConfiguration\n${plugins}`;
  const embedded =
    "plugins:\n  - name: PodSecurity\n    configuration:\n      apiVersion: pod-security.admission.config.k8s.io/v1beta1\n      kind: PodSecurityConfiguration\n      exemptions: {namespaces: [kube-system]}\n";
  for (const apiVersion of ["apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1"])
    assert.deepEqual(podSecurityConfigurationOfText(admission(apiVersion, embedded), "admission.yaml").exemptions.namespaces, ["kube-system"]);
  assert.deepEqual(problemsOf(admission("apiserver.config.k8s.io/v2", embedded)), [
    { line: 1, path: "apiVersion", message: "must be one of apiserver.config.k8s.io/v1, apiserver.k8s.io/v1alpha1 for an AdmissionConfiguration" },
  ]);
  assert.deepEqual(problemsOf(`kind: AdmissionConfiguration\n${embedded}`)[0], {
    line: 1,
    message: "must be one of apiserver.config.k8s.io/v1, apiserver.k8s.io/v1alpha1 for an AdmissionConfiguration",
    path: "apiVersion",
  });
  assert.deepEqual(problemsOf(admission("apiserver.config.k8s.io/v1", `${embedded}plugin: []\n`)), [
    { line: 9, path: "plugin", message: 'unknown field; did you mean "plugins"?' },
  ]);
  assert.deepEqual(problemsOf(admission("apiserver.config.k8s.io/v1", "plugins: {name: PodSecurity}\n")), [
    { line: 3, path: "plugins", message: "must be a list of plugins, one of them named PodSecurity" },
  ]);
  assert.deepEqual(problemsOf(admission("apiserver.config.k8s.io/v1", "plugins:\n  - name: PodSecurity\n    configuration: {}\n  - name: PodSecurity\n")), [
    { line: 6, path: "plugins[1].name", message: "PodSecurity is configured twice" },
  ]);
  assert.deepEqual(problemsOf(admission("apiserver.config.k8s.io/v1", "plugins:\n  - name: PodSecurity\n")), [
    { line: 4, path: "plugins[0].configuration", message: "must be the PodSecurityConfiguration" },
  ]);
});

test("a document with problems gives no configuration, however many parts of it were fine", () => {
  const admissionWithTypo = {
    apiVersion: "apiserver.config.k8s.io/v1",
    kind: "AdmissionConfiguration",
    plugins: [
      { name: "PodSecurity", configuration: { apiVersion: "pod-security.admission.config.k8s.io/v1", kind: "PodSecurityConfiguration", exemption: {} } },
    ],
  };
  const fromAdmission = parsePodSecurityConfiguration(admissionWithTypo);
  assert.equal(fromAdmission.config, undefined);
  assert.deepEqual(fromAdmission.issues, [{ path: ["plugins", 0, "configuration", "exemption"], message: 'unknown field; did you mean "exemptions"?' }]);
  const alone = parsePodSecurityConfiguration({ apiVersion: "pod-security.admission.config.k8s.io/v1", kind: "PodSecurityConfiguration", exemption: {} });
  assert.equal(alone.config, undefined);
  assert.equal(alone.issues.length, 1);
  const fine = parsePodSecurityConfiguration({ apiVersion: "pod-security.admission.config.k8s.io/v1", kind: "PodSecurityConfiguration" });
  assert.deepEqual(fine, { config: DEFAULT_POD_SECURITY_CONFIG, issues: [] });
});
