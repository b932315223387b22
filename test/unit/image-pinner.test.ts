// The pinner's edge: a pod's pull secrets that the Kubernetes API will not give (forbidden, a wait cut at the
// deadline) are an outage of the API, not the registry's answer: the failure policy decides, as it does for
// signature verification. Only another cluster the server cannot read denies whatever the failure policy.
import { test } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { CLUSTER_UNREADABLE } from "../../src/core/cluster-scope.ts";
import { ClusterUnreadableError } from "../../src/engine/cluster-reads.ts";
import { KubeApiError } from "../../src/kube/api-requests.ts";
import { PodCredentials } from "../../src/kube/pod-credentials.ts";
import { ImagePinner } from "../../src/pinning/image-pinner.ts";
import type { DigestResolver } from "../../src/registry/digest-resolver.ts";
import { imagePolicies } from "../support/image-policies.ts";

const PIN = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pin}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"], digestMutate: true}]
`);

/** The pod's pull secrets, read through the real PodCredentials from a reader that fails with `failure`. */
function pinner(failOpen: boolean, failure: Error): { pinner: ImagePinner; resolved: () => number } {
  let resolved = 0;
  const credentials = new PodCredentials({
    pullSecrets: {
      credentialsFor: async () => {
        throw failure;
      },
      credentialsKnown: () => undefined,
    },
    staticCredentials: () => [],
    logger: pino({ level: "silent" }),
  });
  const resolver = {
    resolve: async () => {
      resolved++;
      return { ok: true, digest: `sha256:${"1".repeat(64)}` };
    },
  } as unknown as DigestResolver;
  const p = new ImagePinner({
    policies: () => PIN,
    namespaces: { labels: () => undefined },
    resolver,
    credentials,
    mode: "mutate",
    failOpen,
    logger: pino({ level: "silent" }),
  });
  return { pinner: p, resolved: () => resolved };
}

const REQUEST = {
  namespace: "shop",
  images: [{ image: "registry.example.com/app:1", field: "spec.containers[0].image", pod: 0 }],
  pods: [{ metadata: undefined, pullSecrets: { namespace: "shop", names: ["regcred"] } }],
};

for (const code of ["forbidden", "unauthorized", "aborted", "timeout", undefined] as const) {
  const message = `secrets "regcred" is ${code ?? "unreadable"}`;
  const failure = code ? new KubeApiError(code, message) : new Error(message);

  test(`pull secrets the API does not give (${code ?? "no code"}): failing open admits unpinned with a warning, the registry unasked`, async () => {
    const { pinner: p, resolved } = pinner(true, failure);
    const outcome = await p.pin(REQUEST as never, Date.now() + 5_000);
    assert.equal(outcome?.decision.allowed, true, JSON.stringify(outcome?.decision));
    assert.match(outcome.decision.warnings.join("\n"), /admitted without a digest: .*pull secrets could not be read.*the server fails open/);
    assert.equal(resolved(), 0);
  });

  test(`pull secrets the API does not give (${code ?? "no code"}): failing closed denies as an outage, not as the registry's answer`, async () => {
    const { pinner: p } = pinner(false, failure);
    const outcome = await p.pin(REQUEST as never, Date.now() + 5_000);
    assert.equal(outcome?.decision.allowed, false);
    const message = outcome.decision.violations[0]?.message ?? "";
    assert.match(message, /pull secrets could not be read/);
    assert.doesNotMatch(message, /registry's answer/);
  });
}

test("another cluster the server cannot read: denied even failing open", async () => {
  const { pinner: p } = pinner(true, new ClusterUnreadableError(CLUSTER_UNREADABLE, 'cluster "b" has no kubeconfig on this server'));
  const outcome = await p.pin(REQUEST as never, Date.now() + 5_000);
  assert.equal(outcome?.decision.allowed, false);
  assert.match(outcome.decision.violations[0]?.message ?? "", /cluster-unreadable: .*denied whatever the failure policy/);
});
