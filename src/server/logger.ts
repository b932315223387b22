// The server's logger, one JSON line per entry on stdout. Routine lines (admissions at debug, denials at info)
// are collected and written in batches, which keeps a write per line off the answer path; the batch goes out
// when it is 4 KiB, within a second otherwise, and at once before any warning or error, which are written
// immediately (the line that explains a crash or a failed audit write is never left in a buffer). Everything
// goes through one synchronous destination, so lines keep their order. `flush()` writes out what is
// collected, as after the start-up line: `kubectl logs` of a fresh pod shows it serving.
import { pino, type Logger } from "pino";

export interface ServerLogger {
  logger: Logger;
  /** Writes out what is collected now (after the start-up line, and on close). */
  flush(): void;
  /** Writes out what is collected and stops the one-second flush. */
  close(): void;
}

const BATCH_BYTES = 4096;
const ROUTINE_FLUSH_MS = 1000;

export function createServerLogger(level = process.env.IMPRIMATUR_LOG_LEVEL ?? "info", fd = 1): ServerLogger {
  const out = pino.destination({ dest: fd, sync: true, minLength: BATCH_BYTES });
  let pending = false;
  const flush = () => {
    if (!pending) return;
    pending = false;
    out.flush();
  };
  const routine = {
    write(line: string) {
      out.write(line);
      pending = true;
    },
  };
  const urgent = {
    write(line: string) {
      out.write(line);
      pending = true;
      flush();
    },
  };
  // dedupe: each line goes only to the stream with the highest level it reaches.
  const streams = pino.multistream(
    [
      { level: "trace", stream: routine },
      { level: "warn", stream: urgent },
    ],
    { dedupe: true },
  );
  const timer = setInterval(flush, ROUTINE_FLUSH_MS);
  // The flush must not keep a process alive that has nothing else to do.
  timer.unref();
  return {
    logger: pino({ name: "imprimatur", level }, streams),
    flush,
    close: () => {
      clearInterval(timer);
      flush();
    },
  };
}
