// The callers' files of `serve --client-ca FILE --caller-tokens FILE`, read at start and reread when they change:
// a new CA bundle or token list is used for the next connection or request; a file that does not parse is logged
// with its file and line, and the previous one stays.
import type { Logger } from "pino";
import { ConfigError } from "../config/config-error.ts";
import { hasErrorCode, ImprimaturError } from "../errors/imprimatur-error.ts";
import { parseClientCa, type CallerCredentials, type CallerUpdates } from "./caller-auth.ts";
import { parseCallerTokens } from "./caller-tokens.ts";
import { WatchedFiles } from "../fs/file-reload.ts";

/** A callers' file that stops serve at start: "unreadable", or "invalid" contents; the message names the flag. */
export class CallerFilesError extends ImprimaturError<"unreadable" | "invalid"> {}

export interface WatchedCallerFiles {
  initial: CallerCredentials;
  updates: CallerUpdates;
  close(): void;
}

export async function watchCallerFiles(files: { clientCa?: string | undefined; tokens?: string | undefined }, logger: Logger): Promise<WatchedCallerFiles> {
  const clientCa = files.clientCa === undefined ? undefined : await watchOne("--client-ca", files.clientCa, "client CA", parseClientCa, logger);
  let tokens;
  try {
    tokens = files.tokens === undefined ? undefined : await watchOne("--caller-tokens", files.tokens, "caller tokens", parseCallerTokens, logger);
  } catch (e) {
    clientCa?.close();
    throw e;
  }
  return {
    initial: {
      ...(clientCa ? { clientCaPem: clientCa.current() } : {}),
      ...(tokens ? { tokens: tokens.current() } : {}),
    },
    updates: {
      subscribe: (listener) => {
        const unsubscribe = [clientCa?.subscribe((pem) => listener({ clientCaPem: pem })), tokens?.subscribe((t) => listener({ tokens: t }))];
        return () => unsubscribe.forEach((u) => u?.());
      },
    },
    close: () => {
      clientCa?.close();
      tokens?.close();
    },
  };
}

/** At start a problem stops serve, and the message names the flag. */
async function watchOne<T>(flag: string, file: string, what: string, parse: (text: string, file: string) => T, logger: Logger): Promise<WatchedFiles<T>> {
  try {
    return await WatchedFiles.start({ files: [file], what, parse: ([text]) => parse(text!, file), logger });
  } catch (e) {
    // A tokens file's problems already name the file and line.
    if (e instanceof ConfigError) throw e;
    throw new CallerFilesError(hasErrorCode(e, "unreadable-file") ? "unreadable" : "invalid", `${flag}: ${(e as Error).message}`, { cause: e });
  }
}
