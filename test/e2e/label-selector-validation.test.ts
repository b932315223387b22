// Differential test of label-selector validation: every selector in the corpus below is given to a real
// kube-apiserver (as a NetworkPolicy's podSelector, created as a server-side dry run, which runs Kubernetes'
// ValidateLabelSelector) and to compileLabelSelector (src/core/label-selector.ts), which policies' namespaceSelector
// and objectSelector go through. Both must accept or refuse it alike.
//
// The values of In and NotIn are left out here: this apiserver (v1.20) does not check them, while Kubernetes since
// then refuses values that are no label values in selectors it stores, as Imprimatur does (the unit tests cover
// that); matchLabels values go through the same check (IsValidLabelValue) on both sides and are in the corpus.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { compileLabelSelector } from "../../src/core/label-selector.ts";
import { hasStatus } from "../../src/kube/api-requests.ts";
import type { KubeClient } from "../../src/kube/kube-client.ts";
import { loadKubeClient } from "../../src/kube/kube-connection.ts";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { teardown } from "../support/teardown.ts";

let cluster: KubeCluster;
let kube: KubeClient;

before(async () => {
  cluster = await startKubeCluster();
  kube = loadKubeClient(cluster.kubeconfig);
});

after(() => teardown([() => kube?.close(), () => cluster?.stop()]));

const name63 = "a".repeat(63);
const label = (n: number) => "a".repeat(n);
/** A DNS subdomain of exactly `n` characters: labels of 63 joined by dots, the last one shorter. */
const subdomain = (n: number) => {
  const parts: string[] = [];
  let left = n;
  while (left > 0) {
    const take = Math.min(63, left === 64 ? 62 : left);
    parts.push(label(take));
    left -= take + 1;
  }
  return parts.join(".");
};

const KEYS = [
  "app",
  "A",
  "9",
  "app.kubernetes.io/name",
  "kubernetes.io/metadata.name",
  "My_Key.v-2",
  name63,
  name63 + "a",
  `${subdomain(253)}/x`,
  `${subdomain(254)}/x`,
  `example.com/${name63}`,
  "",
  "-app",
  "app-",
  "_app",
  "app.",
  "a b",
  "ä",
  "a/b/c",
  "/app",
  "example.com/",
  "Example.com/app",
  "example..com/app",
  "-example.com/app",
  "example.com-/app",
  "example_com/app",
  "example.com/-app",
];

const VALUES = ["", "prod", "A", "9", "a.b_c-d", name63, name63 + "a", "-prod", "prod-", ".prod", "pr od", "prod/x", "ü"];

type Selector = Record<string, unknown>;
const corpus: Array<{ name: string; selector: Selector }> = [
  ...KEYS.map((key) => ({ name: `matchLabels key ${JSON.stringify(key)}`, selector: { matchLabels: { [key]: "x" } } })),
  ...VALUES.map((value) => ({ name: `matchLabels value ${JSON.stringify(value)}`, selector: { matchLabels: { app: value } } })),
  ...KEYS.map((key) => ({ name: `Exists key ${JSON.stringify(key)}`, selector: { matchExpressions: [{ key, operator: "Exists" }] } })),
  ...KEYS.slice(0, 12).map((key) => ({
    name: `In key ${JSON.stringify(key)}`,
    selector: { matchExpressions: [{ key, operator: "In", values: ["x"] }] },
  })),
  ...(["In", "NotIn", "Exists", "DoesNotExist", "in", "Equals", ""] as const).flatMap((operator) => [
    { name: `${JSON.stringify(operator)} with a value`, selector: { matchExpressions: [{ key: "app", operator, values: ["x"] }] } },
    { name: `${JSON.stringify(operator)} with an empty list`, selector: { matchExpressions: [{ key: "app", operator, values: [] }] } },
    { name: `${JSON.stringify(operator)} with no values`, selector: { matchExpressions: [{ key: "app", operator }] } },
  ]),
  { name: "empty selector", selector: {} },
  {
    name: "several parts, one bad",
    selector: {
      matchLabels: { app: "x" },
      matchExpressions: [
        { key: "tier", operator: "Exists" },
        { key: "-bad", operator: "Exists" },
      ],
    },
  },
];

test("compileLabelSelector accepts exactly the selectors kube-apiserver accepts", async () => {
  const disagreements: string[] = [];
  let refusedByBoth = 0;
  for (const [i, { name, selector }] of corpus.entries()) {
    const ours = compileLabelSelector(selector, ["spec", "namespaceSelector"]).issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    let theirs: string | undefined;
    try {
      await kube.request("POST", "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", {
        query: { dryRun: "All" },
        body: { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { name: `selector-${i}` }, spec: { podSelector: selector } },
      });
    } catch (e) {
      assert.ok(hasStatus(e, 422), `${name}: the apiserver did not answer with a validation error: ${String(e)}`);
      theirs = (e as Error).message;
    }
    if ((ours.length === 0) !== (theirs === undefined)) {
      disagreements.push(
        `${name}: Imprimatur ${ours.length === 0 ? "accepts" : `refuses (${ours.join("; ")})`}, kube-apiserver ${theirs === undefined ? "accepts" : `refuses (${theirs})`}`,
      );
    }
    if (theirs !== undefined && ours.length > 0) refusedByBoth++;
  }
  assert.deepEqual(disagreements, []);
  // The corpus is worth something only if both sides refuse a good part of it and accept the rest.
  assert.ok(refusedByBoth >= 30 && refusedByBoth <= corpus.length - 20, `refused by both: ${refusedByBoth} of ${corpus.length}`);
});
