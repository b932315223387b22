// Pod Security Admission's verdict as one Decision of the pipeline (psa-decision.ts): which subjects PSA judges
// (objects, not ImageReviews; Pod updates only when PSA's isSignificantPodUpdate says so; pods, not the images an
// object keeps outside pods), what it enforces (Pods only: a workload's template, or a Pod template of another
// resource, is warned about), and the Decision it gives (the denial under the policy name PodSecurity, PSA's
// warnings and audit annotations). Subjects are built from admission requests as the webhook builds them.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { subjectOfImageReview, subjectOfRequest, type AdmissionSubject } from "../../../src/core/admission-subject.ts";
import type { AdmissionRequest } from "../../../src/core/admission-review.ts";
import { podSecurityDecision, POD_SECURITY_POLICY } from "../../../src/core/pod-security/psa-decision.ts";
import type { PodSecurityContext } from "../../../src/core/pod-security/psa-evaluate.ts";
import { podSecurityContext } from "../../../src/policy/pod-security-context.ts";

type Json = Record<string, unknown>;
let cx: PodSecurityContext;

before(async () => {
  const shipped = await podSecurityContext(undefined);
  cx = { ...shipped, config: { ...shipped.config, exemptions: { ...shipped.config.exemptions, usernames: ["ops-bot"] } } };
});

const ENFORCE_BASELINE = { "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/audit": "baseline" };
const WARN_RESTRICTED = { "pod-security.kubernetes.io/warn": "restricted" };
const PRIVILEGED_DENIAL = 'violates PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)';
const PRIVILEGED_AUDIT = 'would violate PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)';

const privilegedSpec = (image = "app:1"): Json => ({ containers: [{ name: "app", image, securityContext: { privileged: true } }] });
const pod = (spec: Json): Json => ({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "shop" }, spec });
const podResource = { group: "", version: "v1", resource: "pods" };

function subjectOf(request: Partial<AdmissionRequest> & { object: Json }): AdmissionSubject {
  const plan = subjectOfRequest({ uid: "u", operation: "CREATE", namespace: "shop", resource: podResource, ...request });
  assert.ok(plan.review, "the request is reviewed");
  return plan.subject;
}

test("a Pod that violates the enforced level is denied under the policy PodSecurity, in PSA's words", () => {
  const d = podSecurityDecision(subjectOf({ object: pod(privilegedSpec()) }), ENFORCE_BASELINE, cx);
  assert.equal(POD_SECURITY_POLICY, "PodSecurity");
  assert.deepEqual(d, {
    allowed: false,
    violations: [{ policy: "PodSecurity", rule: "enforce", field: "spec", message: PRIVILEGED_DENIAL, text: PRIVILEGED_DENIAL }],
    warnings: [],
    auditAnnotations: { "pod-security-enforce-policy": "baseline:latest", "pod-security-audit-violations": PRIVILEGED_AUDIT },
  });
});

test("a Pod that only warns is allowed with PSA's warning and nothing else", () => {
  const d = podSecurityDecision(subjectOf({ object: pod({ containers: [{ name: "app", image: "app:1" }] }) }), WARN_RESTRICTED, cx);
  assert.ok(d);
  assert.equal(d.allowed, true);
  assert.deepEqual(d.violations, []);
  assert.equal(d.warnings.length, 1);
  assert.match(d.warnings[0]!, /^would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false/);
  assert.deepEqual(d.auditAnnotations, { "pod-security-enforce-policy": "privileged:latest" });
});

test("the requesting user is passed on: an exempt user is admitted and the exemption annotated", () => {
  const userInfo = { username: "ops-bot", groups: ["system:authenticated"] };
  assert.deepEqual(podSecurityDecision(subjectOf({ object: pod(privilegedSpec()), userInfo }), ENFORCE_BASELINE, cx), {
    allowed: true,
    violations: [],
    warnings: [],
    auditAnnotations: { "pod-security-exempt": "user" },
  });
  const alice = { username: "alice", groups: ["system:authenticated"] };
  assert.equal(podSecurityDecision(subjectOf({ object: pod(privilegedSpec()), userInfo: alice }), ENFORCE_BASELINE, cx)?.allowed, false);
});

test("a workload's pod template is warned about, never denied, whatever the enforced level", () => {
  const deployment = { apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "d", namespace: "shop" }, spec: { template: { spec: privilegedSpec() } } };
  const labels = { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "baseline" };
  const d = podSecurityDecision(subjectOf({ object: deployment, resource: { group: "apps", version: "v1", resource: "deployments" } }), labels, cx);
  assert.deepEqual(d, { allowed: true, violations: [], warnings: [PRIVILEGED_AUDIT], auditAnnotations: {} });
});

test("an update of a workload is judged on its template even though it is no Pod update", () => {
  const rc = (image: string) => ({
    apiVersion: "v1",
    kind: "ReplicationController",
    metadata: { name: "rc", namespace: "shop" },
    spec: { template: { spec: privilegedSpec(image) } },
  });
  const resource = { group: "", version: "v1", resource: "replicationcontrollers" };
  const d = podSecurityDecision(
    subjectOf({ operation: "UPDATE", object: rc("app:2"), oldObject: rc("app:1"), resource }),
    { "pod-security.kubernetes.io/warn": "baseline" },
    cx,
  );
  assert.deepEqual(d?.warnings, [PRIVILEGED_AUDIT]);
});

test("ImageReviews, and objects whose pods are not to be judged, are left to other decisions", () => {
  const review = subjectOfImageReview({ namespace: "shop", containers: [{ image: "app:1" }] });
  assert.equal(podSecurityDecision(review, ENFORCE_BASELINE, cx), undefined);
  const created = subjectOf({ object: pod(privilegedSpec()) });
  assert.equal(podSecurityDecision({ ...created, judgePods: false }, ENFORCE_BASELINE, cx), undefined);
  assert.equal(podSecurityDecision({ ...created, origin: "imagereview" }, ENFORCE_BASELINE, cx), undefined);
});

test("a Pod update is judged only when PSA would judge it; an ephemeral-containers update always is", () => {
  const created = subjectOf({ object: pod(privilegedSpec()) });
  const update = (object: Json, oldObject: Json | undefined, subResource?: string): AdmissionSubject => ({
    ...created,
    request: {
      ...created.request,
      operation: "UPDATE",
      object,
      ...(oldObject ? { oldObject } : {}),
      ...(subResource ? { subResource } : {}),
    },
  });
  const labelled = { ...pod(privilegedSpec()), metadata: { name: "p", namespace: "shop", labels: { team: "a" } } };
  assert.equal(podSecurityDecision(update(labelled, pod(privilegedSpec())), ENFORCE_BASELINE, cx), undefined);
  assert.equal(podSecurityDecision(update(pod(privilegedSpec("app:2")), pod(privilegedSpec())), ENFORCE_BASELINE, cx)?.allowed, false);
  assert.equal(podSecurityDecision(update(labelled, pod(privilegedSpec()), "ephemeralcontainers"), ENFORCE_BASELINE, cx)?.allowed, false);
  // Without the old object there is nothing to compare with: the Pod is judged.
  const hostOnly = pod({ hostNetwork: true, containers: [] });
  const d = podSecurityDecision(
    { ...subjectOf({ object: hostOnly }), request: { uid: "u", operation: "UPDATE", namespace: "shop", resource: podResource, object: hostOnly } },
    ENFORCE_BASELINE,
    cx,
  );
  assert.equal(d?.allowed, false);
});

test("images an object keeps outside pods are not PSA's: with no pod left there is no decision", () => {
  const created = subjectOf({ object: pod(privilegedSpec()) });
  const outsidePods = { ...created.pods[0]!, isTemplate: true, pathImages: [{ image: "app:1", field: "spec.image" }] };
  assert.equal(podSecurityDecision({ ...created, pods: [outsidePods] }, ENFORCE_BASELINE, cx), undefined);
  assert.equal(podSecurityDecision({ ...created, pods: [] }, ENFORCE_BASELINE, cx), undefined);
  // Beside a pod, such an entry changes nothing.
  assert.equal(podSecurityDecision({ ...created, pods: [outsidePods, ...created.pods] }, ENFORCE_BASELINE, cx)?.allowed, false);
});
