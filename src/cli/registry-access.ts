// The registry settings and the process's own credentials, as `serve` and `node-proxy` read them from their flags
// (--registries, --authfile): one reading for both, so a node reaches registries as the webhook does.
import { loadRegistriesFile } from "../config/registries-file.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { loadAuthFile } from "../credentials/docker-config.ts";
import { CredentialKeyring } from "../credentials/keyring.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";

/** Registry settings and the process's own credentials, from the files named in the config or flags. */
export async function registryAccess(opts: {
  registries?: string;
  authFile?: string;
}): Promise<{ registries?: RegistrySettingsMap; staticCredentials?: CredentialLookup }> {
  const registries = opts.registries ? await loadRegistriesFile(opts.registries) : undefined;
  let staticCredentials: CredentialLookup | undefined;
  if (opts.authFile) {
    const parsed = await loadAuthFile(opts.authFile);
    for (const problem of parsed.problems) process.stderr.write(`imprimatur: ${problem}\n`);
    staticCredentials = CredentialKeyring.of(parsed.entries).lookup;
  }
  return { ...(registries ? { registries } : {}), ...(staticCredentials ? { staticCredentials } : {}) };
}
