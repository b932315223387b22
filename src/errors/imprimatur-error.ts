// The one error base of the project: every error that crosses a module boundary carries a machine-readable
// `code` next to its human message, so callers branch on codes (a registry's "not-found" is a denial, its
// "unreachable" is a failure-policy question) instead of on message text or class names.

export class ImprimaturError<Code extends string = string> extends Error {
  readonly code: Code;

  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
  }
}

/** True when `e` is one of ours with one of the given codes. */
export function hasErrorCode<Code extends string>(e: unknown, ...codes: Code[]): e is ImprimaturError<Code> {
  return e instanceof ImprimaturError && (codes.length === 0 || codes.includes(e.code as Code));
}
