// Child process of record-store-crash.test.ts: one pull's writes (intent, record, its verification, intent removed) and a prune,
// through a RecordStore whose step hook kills this process (SIGKILL, no clean-up) at the step named in argv; or,
// with "first-start" after the step, the first start's snapshot alone.
import { recordPull } from "../../../src/core/pull-verification/pull-records.ts";
import { RecordStore, type StoreStep } from "../../../src/node/record-store.ts";
import { CRASH } from "./record-store-crash-fixture.ts";

const [dir, dieAt] = process.argv.slice(2) as [string, StoreStep | "never"];
const store = await RecordStore.open(dir, {
  onStep: (step) => {
    if (step === dieAt) process.kill(process.pid, "SIGKILL");
  },
});
if (process.argv[4] === "first-start") {
  // The first start's snapshot, into an empty folder.
  await store.writePreloaded([{ imageRef: CRASH.preloaded.imageRef, repositories: [CRASH.preloaded.repository] }]);
  process.stdout.write("done\n");
  process.exit(0);
}
const { pulled, gone, expired } = CRASH;
await store.writeIntent(pulled.image).durable;
await store.update(pulled.imageRef, (c) =>
  recordPull(c.state === "ok" ? c.record : undefined, pulled.imageRef, pulled.repository, { hash: pulled.hash, pod: pulled.pod }, new Date()),
);
await store.recordVerified({ imageRef: pulled.imageRef, ...CRASH.verified, everyPod: true, name: pulled.image });
await store.removeIntent(pulled.image);
const listedAt = store.writeTicket();
const removed = await store.prune(new Set(CRASH.present), listedAt);
if (!removed.includes(gone.imageRef) || store.isPreloaded(expired.imageRef, expired.repository)) throw new Error("the prune did not happen");
process.stdout.write("done\n");
