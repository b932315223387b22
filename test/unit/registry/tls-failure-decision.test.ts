// A registry whose certificate the server does not trust (an intercepted connection, a forgotten CA) is no answer:
// the request is never sent, and the failure policy decides, as for a registry that cannot be reached: failing
// closed the pin is denied saying so; failing open the pod is admitted unpinned, with the fail-open trace. (An
// attacker who can present a certificate can as well drop the connection: failing open admits either way.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { imagesToPin, pinningDecision } from "../../../src/core/image-policy/digest-pinning.ts";
import { RegistryClient } from "../../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../../src/registry/registry-settings.ts";
import { imagePolicies } from "../../support/image-policies.ts";
import { rejection } from "../../support/registry-rejection.ts";
import { FakeRegistry, imageManifest } from "./fake-registry.ts";

test("a registry certificate the server does not trust: no request reaches it, and the failure policy decides the pin", async (t) => {
  const registry = await FakeRegistry.start({ https: true });
  // Its host is allowed, but not its CA: the client trusts only the system's roots for it.
  const client = new RegistryClient({ settings: registrySettingsMap([{ host: registry.host, allowLocalAddresses: true }]) });
  t.after(async () => {
    await client.close();
    await registry.close();
  });
  registry.putManifest("team/app", "v1", imageManifest("tls"));
  const error = await rejection(client.resolveDigest({ registry: registry.host, repository: "team/app", tag: "v1" }));
  assert.equal(error.code, "unreachable", error.message);
  assert.match(error.message, /TLS failed \(UNABLE_TO_VERIFY_LEAF_SIGNATURE\); if the registry uses a private CA, give it as ca in the registries file/);
  assert.equal(registry.requests.length, 0, "no request was sent over the untrusted connection");

  const policies = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pin}
spec:
  rules: [{action: allow, images: ["${registry.host}/*"], digestMutate: true}]
`);
  const image = `${registry.host}/team/app:v1`;
  const targets = imagesToPin(policies, "shop", [{ image, field: "spec.containers[0].image", pod: 0 }], {});
  const resolution = { ok: false as const, error: error.message, code: error.code };
  const closed = pinningDecision(targets, [resolution], [undefined], { mode: "mutate", failOpen: false });
  assert.equal(closed.decision.allowed, false);
  assert.match(closed.decision.violations[0]!.message, /could not be resolved to a digest \(.*TLS failed.*\); denied because the server fails closed/);
  const open = pinningDecision(targets, [resolution], [undefined], { mode: "mutate", failOpen: true });
  assert.equal(open.decision.allowed, true);
  assert.equal(open.decision.auditAnnotations["fail-open"], "true");
  assert.match(open.decision.warnings.join("\n"), /admitted without a digest: .*TLS failed.*the server fails open/);
});
