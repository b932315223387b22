// Pod Security Admission's outcome for a Pod, a workload template, and a namespace change, as PSA gives it
// (k8s.io/pod-security-admission admission/admission.go: ValidatePod, ValidatePodController, EvaluatePod,
// ValidateNamespace, EvaluatePodsInNamespace, isSignificantPodUpdate; admission/response.go for the exemption
// annotations). The profiles are the shipped ones, compiled as the engine compiles them.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { bindProfileClusterWide, NEWEST_POLICY_MINOR, shippedProfiles } from "../../../src/policy/profiles.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";
import { DEFAULT_POD_SECURITY_CONFIG, type PodSecurityConfig } from "../../../src/core/pod-security/psa-config.ts";
import {
  cachedProfileAt,
  checkNamespaceChange,
  evaluatePodSecurity,
  isSignificantPodUpdate,
  POD_SECURITY_ANNOTATIONS,
  type PodSecurityContext,
  type PodSecurityRequest,
} from "../../../src/core/pod-security/psa-evaluate.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";

type Json = Record<string, unknown>;
let cx: PodSecurityContext;
let compiled: string[];

before(async () => {
  const profiles = await shippedProfiles();
  compiled = [];
  const profileAt = cachedProfileAt((name) => {
    compiled.push(name);
    return bindProfileClusterWide(name, profiles);
  });
  cx = { config: DEFAULT_POD_SECURITY_CONFIG, profileAt, newestMinor: NEWEST_POLICY_MINOR };
});

function withConfig(config: Partial<PodSecurityConfig>): PodSecurityContext {
  return { ...cx, config: { ...DEFAULT_POD_SECURITY_CONFIG, ...config } };
}

const PRIVILEGED_SPEC = { containers: [{ name: "app", image: "app:1", securityContext: { privileged: true } }] };
const PLAIN_SPEC = { containers: [{ name: "app", image: "app:1" }] };
const RESTRICTED_MESSAGE =
  'allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false), ' +
  'unrestricted capabilities (container "app" must set securityContext.capabilities.drop=["ALL"]), ' +
  'runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true), ' +
  'seccompProfile (pod or container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")';

function podOf(spec: Json): PodUnderReview {
  return podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec })[0]!;
}

function deploymentOf(spec: Json): PodUnderReview {
  return podsInObject({ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d" }, spec: { template: { spec } } })[0]!;
}

function request(labels: Record<string, string> | undefined, pod: PodUnderReview, extra: Partial<PodSecurityRequest> = {}): PodSecurityRequest {
  return { namespace: "shop", namespaceLabels: labels, username: "alice", object: pod.isTemplate ? "template" : "pod", pod, ...extra };
}

const label = (mode: string, value: string) => ({ [`pod-security.kubernetes.io/${mode}`]: value });

test("enforce denies a Pod in PSA's words; the enforced policy is annotated; no warning on a denial", () => {
  const out = evaluatePodSecurity(request({ ...label("enforce", "restricted"), ...label("warn", "restricted") }, podOf(PLAIN_SPEC)), cx);
  assert.equal(out.allowed, false);
  assert.equal(out.denial, `violates PodSecurity "restricted:latest": ${RESTRICTED_MESSAGE}`);
  assert.deepEqual(out.warnings, []);
  assert.deepEqual(out.auditAnnotations, { [POD_SECURITY_ANNOTATIONS.enforcePolicy]: "restricted:latest" });
});

test("warn admits with PSA's warning; audit adds the same text as the audit-violations annotation", () => {
  const out = evaluatePodSecurity(
    request(
      { ...label("enforce", "baseline"), ...label("warn", "restricted"), ...label("audit", "restricted"), ...label("audit-version", "v1.30") },
      podOf(PLAIN_SPEC),
    ),
    cx,
  );
  assert.equal(out.allowed, true);
  assert.deepEqual(out.warnings, [`would violate PodSecurity "restricted:latest": ${RESTRICTED_MESSAGE}`]);
  assert.deepEqual(out.auditAnnotations, {
    [POD_SECURITY_ANNOTATIONS.enforcePolicy]: "baseline:latest",
    [POD_SECURITY_ANNOTATIONS.auditViolations]: `would violate PodSecurity "restricted:v1.30": ${RESTRICTED_MESSAGE}`,
  });
});

test("a denied Pod is still audited", () => {
  const out = evaluatePodSecurity(request({ ...label("enforce", "baseline"), ...label("audit", "baseline") }, podOf(PRIVILEGED_SPEC)), cx);
  assert.equal(out.allowed, false);
  const message = 'privileged (container "app" must not set securityContext.privileged=true)';
  assert.equal(out.denial, `violates PodSecurity "baseline:latest": ${message}`);
  assert.equal(out.auditAnnotations[POD_SECURITY_ANNOTATIONS.auditViolations], `would violate PodSecurity "baseline:latest": ${message}`);
});

test("workload templates are warned and audited, never enforced", () => {
  const enforceOnly = evaluatePodSecurity(request(label("enforce", "restricted"), deploymentOf(PRIVILEGED_SPEC)), cx);
  assert.deepEqual(enforceOnly, { allowed: true, warnings: [], auditAnnotations: {}, enforced: [] });
  const warned = evaluatePodSecurity(request({ ...label("enforce", "restricted"), ...label("warn", "baseline") }, deploymentOf(PRIVILEGED_SPEC)), cx);
  assert.equal(warned.allowed, true);
  assert.deepEqual(warned.warnings, ['would violate PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)']);
  assert.deepEqual(warned.auditAnnotations, {});
});

test("exemptions: namespace, then user, then runtime class, each named in the exempt annotation", () => {
  const config = withConfig({ exemptions: { namespaces: ["shop"], usernames: ["ci"], runtimeClasses: ["kata"] } });
  const labels = label("enforce", "restricted");
  const exemptAs = (r: PodSecurityRequest, c = config) => evaluatePodSecurity(r, c);
  assert.deepEqual(exemptAs(request(labels, podOf(PRIVILEGED_SPEC))).auditAnnotations, { [POD_SECURITY_ANNOTATIONS.exempt]: "namespace" });
  const other = { namespace: "other" };
  assert.deepEqual(exemptAs(request(labels, podOf(PRIVILEGED_SPEC), { ...other, username: "ci" })).auditAnnotations, {
    [POD_SECURITY_ANNOTATIONS.exempt]: "user",
  });
  const kata = podOf({ ...PRIVILEGED_SPEC, runtimeClassName: "kata" });
  const byRuntime = exemptAs(request(labels, kata, other));
  assert.equal(byRuntime.allowed, true);
  assert.equal(byRuntime.exempt, "runtimeClass");
  assert.deepEqual(byRuntime.auditAnnotations, { [POD_SECURITY_ANNOTATIONS.exempt]: "runtimeClass" });
  // In a namespace where every mode is privileged nothing is evaluated, so no exemption is needed or said.
  assert.deepEqual(exemptAs(request({}, kata, other)).auditAnnotations, {});
  // Exemptions apply to templates alike.
  assert.equal(exemptAs(request(label("warn", "restricted"), deploymentOf(PRIVILEGED_SPEC), { ...other, username: "ci" })).exempt, "user");
  // Without the configuration, nothing is exempt.
  assert.equal(evaluatePodSecurity(request(labels, kata, other), cx).allowed, false);
});

test("the configuration's defaults apply to unlabelled namespaces, label by label", () => {
  const config = withConfig({
    defaults: {
      enforce: { level: "baseline", version: { latest: true } },
      audit: { level: "privileged", version: { latest: true } },
      warn: { level: "restricted", version: { latest: false, minor: 30 } },
    },
  });
  const unlabelled = evaluatePodSecurity(request({}, podOf(PRIVILEGED_SPEC)), config);
  assert.equal(unlabelled.denial, 'violates PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)');
  const relaxed = evaluatePodSecurity(request(label("enforce", "privileged"), podOf(PLAIN_SPEC)), config);
  assert.equal(relaxed.allowed, true);
  assert.deepEqual(relaxed.warnings, [`would violate PodSecurity "restricted:v1.30": ${RESTRICTED_MESSAGE}`]);
});

test("invalid labels: evaluated with PSA's fallbacks, the parse error in the error annotation", () => {
  const out = evaluatePodSecurity(request({ ...label("enforce", "strict"), ...label("warn", "loud") }, podOf(PLAIN_SPEC)), cx);
  assert.equal(out.allowed, false);
  assert.equal(out.denial, `violates PodSecurity "restricted:latest": ${RESTRICTED_MESSAGE}`);
  assert.equal(
    out.auditAnnotations[POD_SECURITY_ANNOTATIONS.error],
    "Failed to parse policy: [" +
      'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted, ' +
      'metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "loud": must be one of privileged, baseline, restricted]',
  );
  // An invalid audit or warn level fails open, but the error is still annotated (no short-cut past it).
  const open = evaluatePodSecurity(request(label("warn", "loud"), podOf(PRIVILEGED_SPEC)), cx);
  assert.equal(open.allowed, true);
  assert.deepEqual(open.warnings, []);
  assert.match(open.auditAnnotations[POD_SECURITY_ANNOTATIONS.error]!, /^Failed to parse policy: metadata\.labels\[pod-security\.kubernetes\.io\/warn\]/);
});

test("a version newer than the profiles is evaluated as the newest and printed as written", () => {
  const out = evaluatePodSecurity(request({ ...label("enforce", "baseline"), ...label("enforce-version", "v1.99") }, podOf(PRIVILEGED_SPEC)), cx);
  assert.equal(out.denial, 'violates PodSecurity "baseline:v1.99": privileged (container "app" must not set securityContext.privileged=true)');
  assert.ok(compiled.includes("baseline"));
  assert.ok(!compiled.some((n) => n.includes("v1.99")));
});

test("older versions apply the checks of their time", () => {
  // runAsUser=0 is a restricted check from v1.23 only.
  const spec = {
    securityContext: { runAsNonRoot: true, runAsUser: 0, seccompProfile: { type: "RuntimeDefault" } },
    containers: [{ name: "app", image: "app", securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } } }],
  };
  const at = (version: string) => evaluatePodSecurity(request({ ...label("enforce", "restricted"), ...label("enforce-version", version) }, podOf(spec)), cx);
  assert.equal(at("v1.22").allowed, true);
  assert.equal(at("v1.23").denial, 'violates PodSecurity "restricted:v1.23": runAsUser=0 (pod must not set runAsUser=0)');
});

test("unknown namespace labels: a Pod is refused as PSA refuses it, a template admitted with the error", () => {
  const pod = evaluatePodSecurity(request(undefined, podOf(PLAIN_SPEC)), cx);
  assert.equal(pod.allowed, false);
  assert.equal(pod.denial, "failed to lookup namespace shop");
  const template = evaluatePodSecurity(request(undefined, deploymentOf(PLAIN_SPEC)), cx);
  assert.equal(template.allowed, true);
  assert.match(template.auditAnnotations[POD_SECURITY_ANNOTATIONS.error]!, /^failed to lookup namespace shop/);
});

test("audit annotation keys hold no '/': kube-apiserver prefixes a webhook's keys with its name and one '/'", () => {
  for (const key of Object.values(POD_SECURITY_ANNOTATIONS)) assert.match(key, /^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$/);
});

// ---- Namespaces ----

function existingPod(name: string, spec: Json, extra: Json = {}): Json {
  return { apiVersion: "v1", kind: "Pod", metadata: { name, namespace: "shop", ...extra }, spec };
}

const controlledBy = (uid: string) => ({ ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: "rs", uid, controller: true }] });

test("namespace labels are checked: invalid ones refused on create, and on update when they changed", () => {
  const bad = label("enforce", "strict");
  const created = checkNamespaceChange({ operation: "CREATE", name: "shop", labels: bad }, [], cx);
  assert.equal(created.allowed, false);
  assert.equal(
    created.denial,
    'Namespace "shop" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted',
  );
  assert.equal(checkNamespaceChange({ operation: "CREATE", name: "shop", labels: label("enforce", "baseline") }, [], cx).allowed, true);
  // An update that keeps the same invalid labels (e.g. adds another label) goes through.
  assert.equal(checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: { ...bad, team: "a" }, oldLabels: bad }, [], cx).allowed, true);
  assert.equal(checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: bad, oldLabels: {} }, [], cx).allowed, false);
});

test("a stricter enforce level warns with the existing pods that violate it, grouped by reasons as PSA does", () => {
  const pods = [
    existingPod("web-2", PRIVILEGED_SPEC),
    existingPod("web-1", PRIVILEGED_SPEC),
    existingPod("db", PRIVILEGED_SPEC),
    existingPod("host", { hostNetwork: true, containers: [{ name: "c", image: "c" }] }),
    existingPod("fine", PLAIN_SPEC),
  ];
  const out = checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: label("enforce", "baseline"), oldLabels: {} }, pods, cx);
  assert.equal(out.allowed, true);
  assert.deepEqual(out.warnings, [
    'existing pods in namespace "shop" violate the new PodSecurity enforce level "baseline:latest"',
    "db (and 2 other pods): privileged",
    "host: host namespaces",
  ]);
  const two = checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: label("enforce", "baseline"), oldLabels: {} }, pods.slice(0, 2), cx);
  assert.deepEqual(two.warnings.slice(1), ["web-1 (and 1 other pod): privileged"]);
});

test("no pod check when enforce did not tighten: unchanged, privileged, or relaxed at the same version", () => {
  const pods = [existingPod("p", PRIVILEGED_SPEC)];
  const change = (from: Record<string, string>, to: Record<string, string>) =>
    checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: to, oldLabels: from }, pods, cx).warnings;
  const restricted = label("enforce", "restricted");
  assert.deepEqual(change(restricted, { ...restricted, ...label("warn", "restricted") }), []);
  assert.deepEqual(change(restricted, label("enforce", "privileged")), []);
  assert.deepEqual(change(restricted, label("enforce", "baseline")), []);
  // Relaxed, but at another version: checked.
  assert.equal(change(restricted, { ...label("enforce", "baseline"), ...label("enforce-version", "v1.30") }).length, 2);
  // An exempt namespace is not checked, and says why.
  const exempt = checkNamespaceChange(
    { operation: "UPDATE", name: "shop", labels: restricted, oldLabels: {} },
    pods,
    withConfig({ exemptions: { namespaces: ["shop"], usernames: [], runtimeClasses: [] } }),
  );
  assert.deepEqual(exempt, { allowed: true, warnings: [], auditAnnotations: { [POD_SECURITY_ANNOTATIONS.exempt]: "namespace" } });
});

test("PSA's limits: at most N pods, one per controller first, and a time budget; the warning says how many were checked", () => {
  const pods = [
    existingPod("a-1", PRIVILEGED_SPEC, controlledBy("rs-a")),
    existingPod("a-2", PRIVILEGED_SPEC, controlledBy("rs-a")),
    existingPod("b-1", { ...PRIVILEGED_SPEC, hostPID: true }, controlledBy("rs-b")),
    existingPod("kata", { ...PRIVILEGED_SPEC, runtimeClassName: "kata" }),
  ];
  const config = withConfig({ exemptions: { namespaces: [], usernames: [], runtimeClasses: ["kata"] } });
  const req = { operation: "UPDATE" as const, name: "shop", labels: label("enforce", "baseline"), oldLabels: {} };
  // Exempt runtime classes are left out of the count; a-2 (a sibling of a-1) comes after b-1.
  assert.deepEqual(checkNamespaceChange(req, pods, config, { maxPods: 2 }).warnings, [
    "new PodSecurity enforce level only checked against the first 2 of 3 existing pods",
    'existing pods in namespace "shop" violate the new PodSecurity enforce level "baseline:latest"',
    "a-1: privileged",
    "b-1: host namespaces, privileged",
  ]);
  let asked = 0;
  assert.deepEqual(checkNamespaceChange(req, pods, config, { outOfTime: () => ++asked >= 1 }).warnings, [
    "new PodSecurity enforce level only checked against the first 1 of 3 existing pods",
    'existing pods in namespace "shop" violate the new PodSecurity enforce level "baseline:latest"',
    "a-1: privileged",
  ]);
  assert.deepEqual(checkNamespaceChange(req, undefined, config).warnings, ["failed to list pods while checking new PodSecurity enforce level"]);
});

test("Pod updates are judged only when PSA would judge them", () => {
  const pod = existingPod("p", { containers: [{ name: "a", image: "a:1", resources: {} }] });
  const same = structuredClone(pod);
  ((same.spec as Json).containers as Json[])[0]!.resources = { limits: { cpu: "1" } };
  (same.metadata as Json).labels = { x: "y" };
  assert.equal(isSignificantPodUpdate(same, pod), false);
  const image = structuredClone(pod);
  ((image.spec as Json).containers as Json[])[0]!.image = "a:2";
  assert.equal(isSignificantPodUpdate(image, pod), true);
  const ephemeral = structuredClone(pod);
  (ephemeral.spec as Json).ephemeralContainers = [{ name: "debug", image: "busybox" }];
  assert.equal(isSignificantPodUpdate(ephemeral, pod), true);
  const seccomp = structuredClone(pod);
  (seccomp.metadata as Json).annotations = { "container.seccomp.security.alpha.kubernetes.io/a": "unconfined" };
  assert.equal(isSignificantPodUpdate(seccomp, pod), true);
});

test("a container without a name has PSA's empty name in its seccomp annotation's key", () => {
  const pod = existingPod("p", { containers: [{ image: "a:1" }] }, { annotations: { "container.seccomp.security.alpha.kubernetes.io/": "runtime/default" } });
  const changed = structuredClone(pod);
  (changed.metadata as Json).annotations = { "container.seccomp.security.alpha.kubernetes.io/": "unconfined" };
  assert.equal(isSignificantPodUpdate(changed, pod), true);
  assert.equal(isSignificantPodUpdate(structuredClone(pod), pod), false);
});

test("outcomes carry nothing more than they say: no stray warning, annotation or enforced check", () => {
  const config = withConfig({ exemptions: { namespaces: ["shop"], usernames: [], runtimeClasses: [] } });
  assert.deepEqual(evaluatePodSecurity(request(label("enforce", "restricted"), podOf(PRIVILEGED_SPEC)), config), {
    allowed: true,
    warnings: [],
    auditAnnotations: { [POD_SECURITY_ANNOTATIONS.exempt]: "namespace" },
    exempt: "namespace",
    enforced: [],
  });
  assert.deepEqual(evaluatePodSecurity(request(label("enforce", "baseline"), podOf(PLAIN_SPEC)), cx), {
    allowed: true,
    warnings: [],
    auditAnnotations: { [POD_SECURITY_ANNOTATIONS.enforcePolicy]: "baseline:latest" },
    enforced: [],
  });
  assert.deepEqual(evaluatePodSecurity(request(undefined, podOf(PLAIN_SPEC)), cx), {
    allowed: false,
    denial: "failed to lookup namespace shop",
    warnings: [],
    auditAnnotations: { [POD_SECURITY_ANNOTATIONS.error]: "failed to lookup namespace shop" },
    enforced: [],
  });
  assert.deepEqual(evaluatePodSecurity(request(undefined, deploymentOf(PLAIN_SPEC)), cx), {
    allowed: true,
    warnings: [],
    auditAnnotations: { [POD_SECURITY_ANNOTATIONS.error]: "failed to lookup namespace shop: its labels are unknown" },
    enforced: [],
  });
});

test("where labels come from the user, the lookup failure says how to give them", () => {
  const out = evaluatePodSecurity(request(undefined, podOf(PLAIN_SPEC)), { ...cx, unknownNamespaceHint: "give its labels with --namespace-labels" });
  assert.equal(out.denial, "failed to lookup namespace shop (give its labels with --namespace-labels)");
  assert.deepEqual(out.auditAnnotations, { [POD_SECURITY_ANNOTATIONS.error]: "failed to lookup namespace shop" });
});

test("an audit level alone is evaluated: the namespace is not all privileged", () => {
  const out = evaluatePodSecurity(request({ ...label("enforce", "privileged"), ...label("audit", "baseline") }, podOf(PRIVILEGED_SPEC)), cx);
  assert.equal(out.allowed, true);
  assert.equal(
    out.auditAnnotations[POD_SECURITY_ANNOTATIONS.auditViolations],
    'would violate PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)',
  );
});

test("only an exempt runtime class exempts: another one, or none, is judged", () => {
  const config = withConfig({ exemptions: { namespaces: [], usernames: [], runtimeClasses: ["kata"] } });
  for (const spec of [PRIVILEGED_SPEC, { ...PRIVILEGED_SPEC, runtimeClassName: "runc" }, { ...PRIVILEGED_SPEC, runtimeClassName: "" }]) {
    const out = evaluatePodSecurity(request(label("enforce", "baseline"), podOf(spec)), config);
    assert.equal(out.allowed, false);
    assert.equal(out.exempt, undefined);
  }
});

test("cachedProfileAt compiles each level and version once", () => {
  const names: string[] = [];
  const profileAt = cachedProfileAt((name) => {
    names.push(name);
    return cx.profileAt("baseline", "latest");
  });
  for (let i = 0; i < 2; i++) {
    profileAt("restricted", "latest");
    profileAt("baseline", 25);
    profileAt("restricted", 25);
  }
  assert.deepEqual(names, ["restricted", "baseline@v1.25", "restricted@v1.25"]);
});

test("Pod updates: seccomp annotations, container counts and ephemeral containers as PSA compares them", () => {
  const base = existingPod(
    "p",
    {
      containers: [{ name: "a", image: "a:1" }],
      initContainers: [{ name: "i", image: "i:1" }],
      ephemeralContainers: [
        { name: "d1", image: "busybox" },
        { name: "d2", image: "alpine" },
      ],
    },
    { annotations: { "seccomp.security.alpha.kubernetes.io/pod": "runtime/default", "container.seccomp.security.alpha.kubernetes.io/a": "runtime/default" } },
  );
  const edit = (change: (p: Json) => void) => {
    const p = structuredClone(base);
    change(p);
    return p;
  };
  const spec = (p: Json) => p.spec as Json;
  const annotations = (p: Json) => (p.metadata as Json).annotations as Json;
  // The same annotations and ephemeral containers on both sides change nothing.
  assert.equal(
    isSignificantPodUpdate(
      edit((p) => ((p.metadata as Json).labels = { a: "b" })),
      base,
    ),
    false,
  );
  assert.equal(
    isSignificantPodUpdate(
      edit((p) => (annotations(p)["seccomp.security.alpha.kubernetes.io/pod"] = "unconfined")),
      base,
    ),
    true,
  );
  assert.equal(
    isSignificantPodUpdate(
      edit((p) => delete annotations(p)["seccomp.security.alpha.kubernetes.io/pod"]),
      base,
    ),
    true,
  );
  assert.equal(
    isSignificantPodUpdate(
      edit((p) => ((spec(p).initContainers as Json[])[0]!.image = "i:2")),
      base,
    ),
    true,
  );
  assert.equal(
    isSignificantPodUpdate(
      edit((p) => (spec(p).initContainers = [])),
      base,
    ),
    true,
  );
  assert.equal(
    isSignificantPodUpdate(
      edit((p) => (spec(p).containers = [])),
      base,
    ),
    true,
  );
  assert.equal(
    isSignificantPodUpdate(
      edit((p) => ((spec(p).ephemeralContainers as Json[])[1]!.image = "alpine:2")),
      base,
    ),
    true,
  );
  // An empty list is no list.
  const bare = existingPod("p", { containers: [{ name: "a", image: "a:1" }] });
  const emptyLists = existingPod("p", { containers: [{ name: "a", image: "a:1" }], initContainers: [], ephemeralContainers: [] });
  assert.equal(isSignificantPodUpdate(emptyLists, bare), false);
  assert.equal(isSignificantPodUpdate(bare, emptyLists), false);
});

test("a namespace create answers only for its labels: a new namespace has no pods to check", () => {
  assert.deepEqual(checkNamespaceChange({ operation: "CREATE", name: "shop", labels: label("enforce", "restricted") }, undefined, cx), {
    allowed: true,
    warnings: [],
    auditAnnotations: {},
  });
  assert.deepEqual(checkNamespaceChange({ operation: "CREATE", name: "shop", labels: label("enforce", "strict") }, undefined, cx), {
    allowed: false,
    denial:
      'Namespace "shop" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted',
    warnings: [],
    auditAnnotations: {},
  });
});

test("an update that changes its invalid labels is refused, even when the old ones were invalid too", () => {
  const out = checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: label("enforce", "stricter"), oldLabels: label("enforce", "strict") }, [], cx);
  assert.deepEqual(out, {
    allowed: false,
    denial:
      'Namespace "shop" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "stricter": must be one of privileged, baseline, restricted',
    warnings: [],
    auditAnnotations: {},
  });
});

test("enforce: the same level at another version is checked; privileged at any version is not", () => {
  const pods = [existingPod("p", PRIVILEGED_SPEC)];
  const v125 = { ...label("enforce", "baseline"), ...label("enforce-version", "v1.25") };
  assert.deepEqual(checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: label("enforce", "baseline"), oldLabels: v125 }, pods, cx).warnings, [
    'existing pods in namespace "shop" violate the new PodSecurity enforce level "baseline:latest"',
    "p: privileged",
  ]);
  // Relaxed to privileged at another version: no pod is listed, so none can be reported missing or unchecked.
  const relaxed = { operation: "UPDATE" as const, name: "shop", labels: label("enforce", "privileged"), oldLabels: v125 };
  assert.deepEqual(checkNamespaceChange(relaxed, undefined, cx).warnings, []);
  assert.deepEqual(checkNamespaceChange(relaxed, pods, cx, { maxPods: 0 }).warnings, []);
});

test("a stricter enforce level that every existing pod meets warns of nothing", () => {
  const out = checkNamespaceChange(
    { operation: "UPDATE", name: "shop", labels: label("enforce", "baseline"), oldLabels: {} },
    [existingPod("p", PLAIN_SPEC)],
    cx,
  );
  assert.deepEqual(out, { allowed: true, warnings: [], auditAnnotations: {} });
});

test("existing pods' warnings are sorted, each naming the lexically first pod of its reasons", () => {
  const app = (extra: Json = {}) => ({ name: "app", image: "app:1", ...extra });
  const pods = [
    existingPod("e", PRIVILEGED_SPEC),
    existingPod("c", { hostNetwork: true, containers: [app()] }),
    existingPod("a-2", { volumes: [{ name: "h", hostPath: { path: "/" } }], containers: [app()] }),
    existingPod("a-1", { volumes: [{ name: "h", hostPath: { path: "/" } }], containers: [app()] }),
    existingPod("a-3", { volumes: [{ name: "h", hostPath: { path: "/" } }], containers: [app()] }),
    existingPod("d", { containers: [app({ ports: [{ containerPort: 80, hostPort: 80 }] })] }),
    existingPod("b", { containers: [app({ securityContext: { capabilities: { add: ["SYS_ADMIN"] } } })] }),
    // Annotations count: the pod's metadata is judged as well as its spec.
    existingPod("f", { containers: [app()] }, { annotations: { "container.apparmor.security.beta.kubernetes.io/app": "unconfined" } }),
  ];
  assert.deepEqual(checkNamespaceChange({ operation: "UPDATE", name: "shop", labels: label("enforce", "baseline"), oldLabels: {} }, pods, cx).warnings, [
    'existing pods in namespace "shop" violate the new PodSecurity enforce level "baseline:latest"',
    "a-1 (and 2 other pods): hostPath volumes",
    "b: non-default capabilities",
    "c: host namespaces",
    "d: hostPort",
    "e: privileged",
    "f: forbidden AppArmor profile",
  ]);
});

test("which pods come first under the limit: those without a controller all do; an owner that is not the controller does not count", () => {
  const ownedBy = (uid: string) => ({ ownerReferences: [{ apiVersion: "v1", kind: "ConfigMap", name: "cm", uid, controller: false }] });
  const req = { operation: "UPDATE" as const, name: "shop", labels: label("enforce", "baseline"), oldLabels: {} };
  const config = withConfig({ exemptions: { namespaces: [], usernames: [], runtimeClasses: ["kata"] } });
  // Two pods owned (not controlled) by the same object are both first, before a controlled pod.
  const owned = [
    existingPod("o-1", PLAIN_SPEC, ownedBy("cm-1")),
    existingPod("o-2", PRIVILEGED_SPEC, ownedBy("cm-1")),
    existingPod("r-1", PLAIN_SPEC, controlledBy("rs")),
  ];
  assert.deepEqual(checkNamespaceChange(req, owned, config, { maxPods: 2 }).warnings, [
    "new PodSecurity enforce level only checked against the first 2 of 3 existing pods",
    'existing pods in namespace "shop" violate the new PodSecurity enforce level "baseline:latest"',
    "o-2: privileged",
  ]);
  const loose = [existingPod("l-1", PLAIN_SPEC), existingPod("l-2", PRIVILEGED_SPEC), existingPod("r-1", PLAIN_SPEC, controlledBy("rs"))];
  assert.deepEqual(checkNamespaceChange(req, loose, config, { maxPods: 2 }).warnings.at(-1), "l-2: privileged");
  // A runtime class that is not exempt is checked like any other.
  const runc = [existingPod("runc", { ...PRIVILEGED_SPEC, runtimeClassName: "runc" }), existingPod("kata", { ...PRIVILEGED_SPEC, runtimeClassName: "kata" })];
  assert.deepEqual(checkNamespaceChange(req, runc, config).warnings, [
    'existing pods in namespace "shop" violate the new PodSecurity enforce level "baseline:latest"',
    "runc: privileged",
  ]);
});
