// --namespace-labels NS:KEY=VALUE[,KEY=VALUE…]: what it accepts, what it refuses (with the value and the syntax),
// and how flag labels combine with a namespaces file and with a PolicyTest's own namespaceLabels.
import { test } from "node:test";
import assert from "node:assert/strict";
import { UsageError } from "../../src/cli/args.ts";
import { mergeNamespaceLabels, parseNamespaceLabels, withLabels } from "../../src/cli/namespace-labels-flag.ts";

test("each value labels one namespace; it also gets kubernetes.io/metadata.name; a namespace given twice gets both", () => {
  const labels = parseNamespaceLabels(["team-a:env=prod,tier=web", "lab:", "team-a:example.com/owner=ops,empty="]);
  assert.deepEqual(Object.fromEntries(labels), {
    "team-a": { "kubernetes.io/metadata.name": "team-a", env: "prod", tier: "web", "example.com/owner": "ops", empty: "" },
    lab: { "kubernetes.io/metadata.name": "lab" },
  });
  assert.deepEqual(parseNamespaceLabels([]).size, 0);
});

test("malformed values are usage errors naming the value, the problem and the syntax", () => {
  const cases: Array<[string, RegExp]> = [
    ["team-a", /no namespace \(NAMESPACE: comes first\)/],
    ["Team:env=prod", /"Team" is not a namespace name/],
    [":env=prod", /"" is not a namespace name/],
    ["team-a:env", /"env" is not KEY=VALUE/],
    ["team-a:=x", /"" is not a label key/],
    ["team-a:env=a b", /"a b" is not a label value/],
    ["team-a:env=prod,", /"" is not KEY=VALUE/],
  ];
  for (const [value, why] of cases) {
    assert.throws(
      () => parseNamespaceLabels([value]),
      (e: unknown) =>
        e instanceof UsageError &&
        e.message.startsWith(`--namespace-labels ${JSON.stringify(value)}: `) &&
        why.test(e.message) &&
        e.message.endsWith("expected NAMESPACE:KEY=VALUE[,KEY=VALUE…], e.g. team-a:env=prod,tier=web"),
      value,
    );
  }
});

test("flag labels go over a file's, key by key; namespaces the flag does not name keep the file's labels", () => {
  const file = { labels: (ns: string) => (ns === "shop" ? { "kubernetes.io/metadata.name": "shop", env: "dev", tier: "web" } : undefined) };
  const source = withLabels(file, parseNamespaceLabels(["shop:env=prod", "lab:"]));
  assert.deepEqual(source.labels("shop"), { "kubernetes.io/metadata.name": "shop", env: "prod", tier: "web" });
  assert.deepEqual(source.labels("lab"), { "kubernetes.io/metadata.name": "lab" });
  assert.equal(source.labels("elsewhere"), undefined, "unknown stays unknown: a namespaceSelector then denies");
});

test("a test's own labels go over the command line's", () => {
  const merged = mergeNamespaceLabels(parseNamespaceLabels(["shop:env=dev,tier=web", "lab:env=dev"]), new Map([["shop", { env: "prod" }]]));
  assert.deepEqual(Object.fromEntries(merged), {
    shop: { "kubernetes.io/metadata.name": "shop", env: "prod", tier: "web" },
    lab: { "kubernetes.io/metadata.name": "lab", env: "dev" },
  });
});
