// Mutation testing of the security-critical code: `npm run mutation` (not part of `npm test`).
// Each area is mutated against the unit tests that reach it, not the whole suite, so an area takes minutes on a
// small machine. STRYKER_AREA picks the area; scripts/mutation.sh runs the areas in turn.
// The TypeScript sources run on Node's type stripping in Stryker's sandbox as they do in `npm test`: the
// instrumented code stays erasable TypeScript.

export const areas = {
  // The ticketPattern runs on the linear-time regex engine, whose limits and refusals are tested with it.
  "break-glass": {
    mutate: ["src/core/break-glass.ts", "src/core/primitives/linear-regex.ts"],
    testFiles: ["test/unit/break-glass*.test.ts", "test/unit/linear-regex.test.ts"],
  },
  conditions: {
    mutate: ["src/core/conditions/*.ts"],
    testFiles: ["test/unit/conditions/*.test.ts"],
  },
  attestors: {
    mutate: ["src/core/image-policy/attestors.ts"],
    testFiles: ["test/unit/verification/attestor-*.test.ts", "test/unit/verification/distinct-signers.test.ts"],
  },
  "pull-verification": {
    mutate: ["src/core/pull-verification/*.ts"],
    testFiles: ["test/unit/pull-verification/*.test.ts"],
  },
  "verify-entry": {
    mutate: ["src/verification/verify-entry.ts"],
    testFiles: [
      "test/unit/verification/verify-key-signatures.test.ts",
      "test/unit/verification/verify-sigstore.test.ts",
      "test/unit/verification/verify-attestations.test.ts",
      "test/unit/verification/verify-entry.test.ts",
    ],
  },
  "node-image-proxy": {
    mutate: ["src/node/node-image-proxy.ts"],
    // record-store-crash.test.ts starts the proxy over the folders its children left.
    testFiles: ["test/unit/node/*.test.ts"],
  },
  "image-policy": {
    mutate: [
      "src/core/image-policy/*.ts",
      "!src/core/image-policy/attestors.ts",
      "!src/core/image-policy/digest-pinning.ts",
      "!src/core/image-policy/running-pods.ts",
      // Moved out of image-policy/ (the kinds share them), still judged by its tests.
      "src/core/verification-results.ts",
      "src/core/schema-issues.ts",
    ],
    testFiles: [
      "test/unit/image-policy.test.ts",
      "test/unit/image-policy-evaluation.test.ts",
      "test/unit/compile-attestors.test.ts",
      "test/unit/verification/attestor-policy.test.ts",
      "test/unit/verification/evaluation.test.ts",
      "test/unit/verification/verified-judgements.test.ts",
      "test/unit/namespaced-policies.test.ts",
      // schema-issues.ts words every schema error of every kind.
      "test/unit/schema-issues.test.ts",
    ],
  },
  "trust-root": {
    mutate: ["src/core/trust-root/*.ts"],
    testFiles: ["test/unit/verification/trust-root*.test.ts"],
  },
  // What an exception sets aside, for which subjects, and what never loads: through the engine, as every entry point.
  "policy-exceptions": {
    mutate: ["src/core/policy-exception/*.ts"],
    testFiles: ["test/unit/engine/policy-exceptions.test.ts", "test/unit/policy-exception-core.test.ts"],
  },
  "pod-restriction": {
    mutate: ["src/core/pod-restriction/**/*.ts"],
    testFiles: ["test/unit/pod-restriction/*.test.ts", "test/unit/pss-profiles.test.ts"],
  },
  // The rest of src/core, in four areas of a few hundred mutants each (one area is one run; a run that is
  // stopped keeps nothing). Each is tested by the unit tests of its own files and the engine's, not the server or
  // CLI tests that also import them (those reach the core through the same functions and make a run last hours).
  "core-references": {
    mutate: ["src/core/image-reference.ts", "src/core/image-pattern.ts", "src/core/primitives/glob.ts"],
    testFiles: [
      "test/unit/image-reference.test.ts",
      "test/unit/image-pattern.test.ts",
      "test/unit/image-pattern-mistakes.test.ts",
      "test/unit/glob.test.ts",
      "test/unit/digest-resolver.test.ts",
    ],
  },
  "core-pods": {
    mutate: [
      "src/core/pod-images.ts",
      "src/core/pod-locations.ts",
      "src/core/pod-under-review.ts",
      "src/core/primitives/field-path.ts",
      "src/core/image-paths.ts",
      "src/core/workload-templates.ts",
      "src/core/image-policy/digest-pinning.ts",
      "src/core/image-policy/running-pods.ts",
    ],
    testFiles: [
      "test/unit/image-paths.test.ts",
      "test/unit/image-volumes.test.ts",
      "test/unit/workload-templates.test.ts",
      "test/unit/digest-pinning.test.ts",
      "test/unit/admission-subject-pods.test.ts",
      "test/unit/scan/running-pods.test.ts",
      "test/unit/verification/verified-digest.test.ts",
    ],
  },
  "core-admission": {
    mutate: ["src/core/admission-review.ts", "src/core/admission-subject.ts", "src/core/image-review.ts"],
    testFiles: [
      "test/unit/admission-review.test.ts",
      "test/unit/admission-subject-pods.test.ts",
      "test/unit/image-review.test.ts",
      "test/unit/image-paths.test.ts",
      "test/unit/image-volumes.test.ts",
      "test/unit/request-match.test.ts",
      "test/unit/caller-auth/caller-clusters.test.ts",
      "test/unit/review-service.test.ts",
    ],
  },
  "core-decisions": {
    mutate: [
      "src/core/*.ts",
      "src/core/policy-set/*.ts",
      "src/core/primitives/duration.ts",
      "src/core/primitives/json-shapes.ts",
      "src/core/primitives/unknown-field.ts",
      "!src/core/policy-set/request-scope.ts",
      "!src/core/break-glass.ts",
      "!src/core/image-reference.ts",
      "!src/core/image-pattern.ts",
      "!src/core/pod-images.ts",
      "!src/core/pod-locations.ts",
      "!src/core/pod-under-review.ts",
      "!src/core/image-paths.ts",
      "!src/core/workload-templates.ts",
      "!src/core/admission-review.ts",
      "!src/core/admission-subject.ts",
      "!src/core/image-review.ts",
      "!src/core/verification-results.ts",
      "!src/core/schema-issues.ts",
    ],
    testFiles: [
      "test/unit/decision-cache.test.ts",
      "test/unit/duration.test.ts",
      "test/unit/label-selector.test.ts",
      "test/unit/unknown-field.test.ts",
      "test/unit/request-match.test.ts",
      "test/unit/caller-auth/caller-clusters.test.ts",
      "test/unit/cluster-policies.test.ts",
      "test/unit/namespace-scope.test.ts",
      // The unknown-namespace-labels hint (namespace-labels.ts), as a scope's denial gives it.
      "test/unit/request-scope.test.ts",
      "test/unit/namespaced-policies.test.ts",
      "test/unit/load-policies.test.ts",
      "test/unit/examples-safe.test.ts",
      "test/unit/image-policy.test.ts",
      "test/unit/engine/*.test.ts",
    ],
  },
  // Which requests a policy is for (matchConstraints: resources, selectors, subjects, matchConditions).
  "request-match": {
    mutate: ["src/core/request-match/*.ts", "src/core/policy-set/request-scope.ts"],
    testFiles: [
      "test/unit/request-match.test.ts",
      "test/unit/request-match-compile.test.ts",
      "test/unit/request-scope.test.ts",
      "test/unit/cli/check-request-scope.test.ts",
      "test/unit/label-selector.test.ts",
      // The matchConditions' shared cost budget, and the reason given when it runs out.
      "test/unit/cel-cost-limits.test.ts",
    ],
  },
  // Policy reports in both formats, from the background scan's results.
  "policy-reports": {
    mutate: ["src/core/policy-reports/*.ts"],
    testFiles: ["test/unit/policy-reports/*.test.ts", "test/unit/scan/pod-audit.test.ts"],
  },
  // Pod Security Admission as a drop-in: namespace labels, its configuration, evaluation and messages.
  // checks/ holds one file per PSA check; test/unit/pod-security/checks.test.ts (in the first glob) holds them to the profiles.
  "pod-security": {
    mutate: ["src/core/pod-security/*.ts", "src/core/pod-security/checks/*.ts"],
    testFiles: ["test/unit/pod-security/*.test.ts", "test/unit/engine/pod-security.test.ts", "test/unit/cli/check-pod-security.test.ts"],
  },
  verification: {
    mutate: ["src/verification/*.ts", "!src/verification/verify-entry.ts"],
    // The verifier's sharing with other processes (serve --workers) is tested with the broker it shares through.
    testFiles: ["test/unit/verification/*.test.ts", "test/unit/workers/shared-verifications.test.ts", "test/unit/engine/cached-verifications.test.ts"],
  },
  node: {
    mutate: ["src/node/*.ts", "!src/node/node-image-proxy.ts"],
    testFiles: ["test/unit/node/*.test.ts"],
  },
  // The registry client's authentication (challenges, tokens, their cache) and its checks of content digests.
  "registry-auth-digest": {
    mutate: [
      "src/registry/auth-challenge.ts",
      "src/registry/registry-auth.ts",
      "src/registry/token-cache.ts",
      "src/registry/content-digest.ts",
      "src/registry/registry-client.ts",
    ],
    testFiles: ["test/unit/registry/*.test.ts", "test/unit/verification/download-limits.test.ts"],
  },
  // Notary Project (Notation) signatures, in four areas: each is tested by the unit tests of its own files and by
  // those that verify whole signatures through it (notation-verification.test.ts, the published vectors).
  // revocation-services.test.ts tests the OCSP/CRL test services only and reaches no file here; the revocation
  // tests, which start those services, run only in the area that mutates revocation.
  "notation-envelopes": {
    mutate: ["src/notation/jws-envelope.ts", "src/notation/cose-envelope.ts", "src/notation/notation-envelope.ts", "src/notation/notation-payload.ts"],
    testFiles: [
      "test/unit/notation/jws-envelope.test.ts",
      "test/unit/notation/cose-envelope.test.ts",
      "test/unit/notation/notation-payload.test.ts",
      "test/unit/notation/notation-verification.test.ts",
      "test/unit/notation/published-vectors.test.ts",
      "test/unit/notation/notation-envelopes-mutants.test.ts",
    ],
  },
  "notation-certificates": {
    mutate: ["src/notation/notation-certificates.ts"],
    testFiles: [
      "test/unit/notation/notation-certificates.test.ts",
      "test/unit/notation/notation-timestamp.test.ts",
      "test/unit/notation/notation-verification.test.ts",
      "test/unit/notation/published-vectors.test.ts",
      "test/unit/notation/notation-certificates-mutants.test.ts",
    ],
  },
  "notation-timestamp": {
    mutate: ["src/notation/notation-timestamp.ts"],
    testFiles: [
      "test/unit/notation/notation-timestamp.test.ts",
      "test/unit/notation/notation-verification.test.ts",
      "test/unit/notation/published-vectors.test.ts",
      "test/unit/notation/notation-timestamp-mutants.test.ts",
    ],
  },
  "notation-verification": {
    mutate: ["src/notation/notation-verification.ts", "src/notation/notation-revocation.ts"],
    testFiles: [
      "test/unit/notation/notation-verification.test.ts",
      "test/unit/notation/notation-revocation.test.ts",
      "test/unit/notation/published-vectors.test.ts",
      "test/unit/notation/notation-verification-mutants.test.ts",
    ],
  },
};

const areaName = process.env.STRYKER_AREA ?? "break-glass";
const area = areas[areaName];
if (!area) throw new Error(`unknown STRYKER_AREA ${JSON.stringify(areaName)}; known: ${Object.keys(areas).join(", ")}`);

/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "tap",
  plugins: ["@stryker-mutator/tap-runner"],
  mutate: area.mutate,
  tap: {
    testFiles: area.testFiles,
    // Node's own test runner with its TAP reporter; each test file is one "test" to Stryker.
    nodeArgs: ["--test-reporter=tap", "--test-timeout=300000", "-r", "{{hookFile}}", "{{testFile}}"],
  },
  // Only the test files that reach a mutant run against it.
  coverageAnalysis: "perTest",
  // The machine is shared: one test process at a time, and generous timeouts so load is not read as a hang.
  concurrency: 1,
  timeoutMS: 20000,
  timeoutFactor: 3,
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: `reports/mutation/${areaName}.html` },
  jsonReporter: { fileName: `reports/mutation/${areaName}.json` },
  // Below 80% of mutants killed the area fails (issue 21: every survivor is equivalent or gets a test).
  thresholds: { high: 90, low: 80, break: 80 },
  // One sandbox folder per area, so two areas can run side by side.
  // Anchored: deploy/crds/reports (read by the report tests) must reach the sandbox.
  ignorePatterns: ["/.state", "/.scratch", "/reports", "/.stryker-tmp"],
  tempDirName: `.stryker-tmp/${areaName}`,
  // A re-run tests only the mutants whose code or tests changed since the last complete run of the area.
  incremental: true,
  incrementalFile: `reports/mutation/${areaName}.incremental.json`,
  cleanTempDir: true,
};
