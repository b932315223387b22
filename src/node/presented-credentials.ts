// The credential a pull carries (the CRI AuthConfig the kubelet matched to the image's registry), as the registry
// client asks for credentials. It is offered for the image's own registry only: a signature repository elsewhere
// or a mirror never receives it, as a credential goes only to the host it was issued for.
import { isAnonymous, usernameAndPassword, type RegistryAuth } from "../core/pull-verification/credential-hash.ts";
import { ANONYMOUS, type CredentialLookup, type RegistryCredential } from "../credentials/credential.ts";
import { normalizeRegistryHost } from "../registry/registry-settings.ts";

/** What the registry client may use of a pull's AuthConfig, for `registry` (the image's, as in its reference). */
export function presentedCredentials(auth: RegistryAuth | undefined, registry: string): CredentialLookup {
  if (!auth || isAnonymous(auth)) return ANONYMOUS;
  const credential = credentialOf(auth);
  const host = normalizeRegistryHost(registry);
  return (asked) => (normalizeRegistryHost(asked) === host ? [credential] : []);
}

function credentialOf(auth: RegistryAuth): RegistryCredential {
  const { username, password } = usernameAndPassword(auth);
  return {
    source: "the pull's credentials",
    ...(username ? { username } : {}),
    ...(password ? { password } : {}),
    ...(auth.identityToken ? { identityToken: auth.identityToken } : {}),
    ...(auth.registryToken ? { registryToken: auth.registryToken } : {}),
  };
}
