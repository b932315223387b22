// What can stop the signing of a release image, by code: the CLI (sign-image, install --signing-key) and the
// project's scripts branch on these. Registry failures while reading or pushing stay RegistryErrors.
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type ReleaseErrorCode =
  /** The key file cannot be read. */
  | "key-file"
  /** The file is not an unencrypted private key in PEM (cosign's own encrypted format, a passphrase-protected PKCS#8). */
  | "key-format"
  /** The key is not an ECDSA P-256 key. */
  | "key-type"
  /** The image is not named by a sha256 digest, its manifest is not an image's, or its checkout cannot be read. */
  | "image";

export class ReleaseError extends ImprimaturError<ReleaseErrorCode> {}
