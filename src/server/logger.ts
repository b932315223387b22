// The server's logger. Routine lines (admissions at debug, denials at info) go through an asynchronous
// buffer, which keeps logging off the answer path; warnings and errors are written at once, so the line
// that explains a crash or a failed audit write is never left in a buffer.
import { pino, type Logger } from "pino";

export interface ServerLogger {
  logger: Logger;
  /** Writes out what the buffer holds (on close). */
  flush(): void;
}

export function createServerLogger(level = process.env.IMPRIMATUR_LOG_LEVEL ?? "info"): ServerLogger {
  const buffered = pino.destination({ dest: 1, sync: false, minLength: 4096 });
  const immediate = pino.destination({ dest: 1, sync: true });
  // dedupe: each line goes only to the stream with the highest level it reaches.
  const streams = pino.multistream(
    [
      { level: "trace", stream: buffered },
      { level: "warn", stream: immediate },
    ],
    { dedupe: true },
  );
  return { logger: pino({ name: "imprimatur", level }, streams), flush: () => buffered.flushSync() };
}
