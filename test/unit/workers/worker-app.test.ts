// A worker of serve --workers, in-process: its app starts once the primary has given it a certificate and the
// policies, says it serves, judges by each set the primary sends (a newer one replaces the set; an older one, overtaken,
// is ignored), and stops — telling the primary — when it cannot load a set the primary put in force, rather than go on
// judging by another set than the other workers. The primary's side is a stand-in channel here (the messages
// themselves); the processes over node:cluster's IPC are tested in test/e2e/serve-workers.test.ts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { tempFolder } from "../../support/temp-folders.ts";
import { ensureServingCertificate } from "../../../src/tls/tls-bootstrap.ts";
import type { PolicySnapshot } from "../../../src/workers/policy-snapshot.ts";
import { PrimaryChannel, type ChannelEnds } from "../../../src/workers/primary-channel.ts";
import type { ToPrimary } from "../../../src/workers/worker-messages.ts";
import { podReview } from "../../support/admission.ts";
import { postJson } from "../../support/https-client.ts";
import { startTestApp } from "../../support/in-process-app.ts";

const denying = (name: string, images: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: ${name} }
spec:
  rules: [{ action: deny, images: ["${images}"] }]
  default: allow
`;

const snapshot = (version: number, text: string): PolicySnapshot => ({
  version,
  description: "policies/",
  errors: [],
  texts: [{ origin: "policies/policy.yaml", text }],
});

/** The primary's end of the channel: what the worker sent, and a way to send it messages. */
function primaryStandIn() {
  const sent: ToPrimary[] = [];
  let deliver: (message: unknown) => void = () => undefined;
  const ends: ChannelEnds = {
    send: (message) => void sent.push(message),
    onMessage: (listener) => void (deliver = listener),
    onDisconnect: () => undefined,
    disconnect: () => undefined,
  };
  return { sent, ends, deliver: (message: unknown) => deliver(message) };
}

async function until(check: () => Promise<boolean> | boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

test("a worker serves with the primary's certificate and policies, follows each newer set, and stops when it cannot load one", async () => {
  const stateDir = await tempFolder("imprimatur-worker-app-");
  const tls = await ensureServingCertificate(stateDir, ["127.0.0.1"]);
  const primary = primaryStandIn();
  const stops: Array<number | "diverged"> = [];
  const channel = new PrimaryChannel(primary.ends, () => assert.fail("the primary is not gone"));
  channel.onDrain((how) => stops.push(how));
  primary.deliver({ imprimatur: "tls", tls: { cert: tls.certPem, key: tls.keyPem } });
  primary.deliver({ imprimatur: "policies", snapshot: snapshot(4, denying("no-nginx", "docker.io/library/nginx*")) });
  const app = await startTestApp({ policies: "unused", primary: channel, stateDir, watchPolicies: true });
  try {
    assert.deepEqual(primary.sent, [{ imprimatur: "serving", port: app.app.port }]);
    const allowed = async (image: string) => (await postJson(`${app.base}/validate`, app.ca, podReview({ images: [image] }))).body.response.allowed as boolean;
    assert.equal(await allowed("nginx:1.27"), false);
    assert.equal(await allowed("redis:7"), true);

    primary.deliver({ imprimatur: "policies", snapshot: snapshot(5, denying("no-redis", "docker.io/library/redis*")) });
    await until(async () => !(await allowed("redis:7")));
    assert.equal(await allowed("redis:7"), false, "the newer set is in force");
    assert.equal(await allowed("nginx:1.27"), true);
    // A set older than the one in force (a message overtaken) changes nothing.
    primary.deliver({ imprimatur: "policies", snapshot: snapshot(3, denying("no-busybox", "docker.io/library/busybox*")) });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await allowed("busybox:1"), true);

    // A set it cannot load: the primary is told, the worker is to stop, and meanwhile it still judges by its set.
    primary.deliver({ imprimatur: "policies", snapshot: snapshot(6, "kind: [unclosed") });
    await until(() => stops.length > 0);
    assert.deepEqual(stops, ["diverged"]);
    const told = primary.sent.find((m) => m.imprimatur === "diverged");
    assert.ok(told && /YAML/.test(told.reason), JSON.stringify(primary.sent));
    assert.equal(await allowed("redis:7"), false);
  } finally {
    await app.close();
  }
});
