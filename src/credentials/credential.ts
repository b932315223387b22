// A registry credential as the registry client uses it, and how the client asks for the ones that fit a
// host. Where a credential came from travels with it so logs can say which secret was used — never its value.

export interface RegistryCredential {
  /** Where it came from, for logs and audit records: "secret team-a/regcred", "authfile". Never the secret. */
  source: string;
  username?: string;
  password?: string;
  /** OAuth2 refresh token (dockerconfig "identitytoken"), exchanged at the Bearer token realm. */
  identityToken?: string;
  /** A bearer token sent as is (dockerconfig "registrytoken"). */
  registryToken?: string;
}

/**
 * The credentials to try, in order, for one repository on one registry host (as the client will contact it:
 * the upstream registry or a mirror). An empty list means: go anonymous. A lookup's answers depend only on its
 * arguments: credentials that change (a reloaded file, a Secret read again) come as a new lookup.
 */
export type CredentialLookup = (host: string, repository: string) => RegistryCredential[];

export const ANONYMOUS: CredentialLookup = () => [];
