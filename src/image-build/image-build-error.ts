// What can stop an image build, by code: the caller (the CLI, a test harness) branches on these.
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type ImageBuildErrorCode =
  /** package-lock.json is missing, unreadable, too old, or does not list a dependency. */
  | "lockfile"
  /** node_modules does not hold what the lockfile says (not installed, another version): run npm ci. */
  | "node-modules"
  /** The Node.js runtime or a library it loads cannot be found or read. */
  | "runtime"
  /** A file of the app cannot go into the image (a symlink leaving its package, an unreadable file, TypeScript that does not parse). */
  | "input"
  /** The output folder holds something that is not an OCI image layout. */
  | "layout";

export class ImageBuildError extends ImprimaturError<ImageBuildErrorCode> {}
