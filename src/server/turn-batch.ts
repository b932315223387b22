/**
 * Reviews whose bodies are read in one turn of the event loop are judged, and answered, together after it.
 *
 * Without this, each connection's request is read, parsed, judged and its TLS answer written before the next
 * connection's bytes are even looked at, so the policy code, OpenSSL and the kernel's network path take turns on
 * the core's caches once per request. Judging after the turn's reads (one `setImmediate` shared by every request
 * of the turn) runs like work back to back: on the admission-throughput benchmark this took the server from 103 to
 * 112 µs of CPU per admission to 66 to 70 µs (bench/admission-throughput.md). A lone request waits only for the
 * rest of its turn, microseconds.
 */
let turnEnd: Promise<void> | undefined;

/** Resolves once the event loop has finished reading what arrived in this turn: the same promise for every caller in the turn. */
export function afterThisTurnsReads(): Promise<void> {
  turnEnd ??= new Promise((resolve) =>
    setImmediate(() => {
      turnEnd = undefined;
      resolve();
    }),
  );
  return turnEnd;
}
