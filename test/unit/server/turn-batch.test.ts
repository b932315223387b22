// The server judges the reviews read in one turn of the event loop after that turn: one shared wait per turn, not
// one per request, that lets the turn's microtasks and I/O callbacks run first and ends in the check phase.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, connect, type AddressInfo, type Socket } from "node:net";
import { afterThisTurnsReads } from "../../../src/server/turn-batch.ts";

test("every caller in one turn gets the same wait; a caller after it ended gets a new one", async () => {
  const first = afterThisTurnsReads();
  const second = afterThisTurnsReads();
  assert.equal(first, second);
  await first;
  const next = afterThisTurnsReads();
  assert.notEqual(next, first);
  await next;
});

test("the wait outlasts the microtasks of the turn it was asked in", async () => {
  const order: string[] = [];
  const wait = afterThisTurnsReads().then(() => order.push("turn ended"));
  for (let i = 0; i < 20; i++) await Promise.resolve();
  order.push("microtasks done");
  await wait;
  assert.deepEqual(order, ["microtasks done", "turn ended"]);
});

test("requests read in one turn are all read before the first of them goes on", async () => {
  // Two connections whose bytes are both waiting when the turn polls: each read callback asks for the wait;
  // whichever goes on first must find the other already read.
  const reads: string[] = [];
  const seenWhenGoingOn: string[][] = [];
  const server = createServer((socket: Socket) => {
    socket.once("data", (data) => {
      reads.push(data.toString());
      void afterThisTurnsReads().then(() => {
        seenWhenGoingOn.push([...reads]);
        socket.end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const clients = await Promise.all(
    ["a", "b"].map(
      (name) =>
        new Promise<Socket>((resolve) => {
          const c = connect(port, "127.0.0.1", () => resolve(c));
          c.on("error", () => {});
          c.resume();
          (c as Socket & { label?: string }).label = name;
        }),
    ),
  );
  // Let the server accept both, then hold its loop busy while both clients write, so both reads are ready together.
  await new Promise((resolve) => setTimeout(resolve, 50));
  for (const c of clients) c.write((c as Socket & { label?: string }).label!);
  const busyUntil = Date.now() + 30;
  while (Date.now() < busyUntil) {
    // the server and clients share this process: spinning keeps the poll phase from running until both bytes are there
  }
  await Promise.all(clients.map((c) => new Promise((resolve) => c.once("close", resolve))));
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.deepEqual(
    seenWhenGoingOn.map((seen) => [...seen].sort()),
    [
      ["a", "b"],
      ["a", "b"],
    ],
  );
});
