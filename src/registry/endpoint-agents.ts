// undici Agents carrying TLS material: one per host listed in the settings (its CA, its client certificate),
// one per listed CA lent to the hosts its registry names (token realms, redirect targets), and one shared
// agent with the default trust for every other host. Keeping the trust per host means a registry's private CA
// or client certificate is never offered to, or trusted for, some other host; sharing the default agent keeps
// the number of agents bounded by the settings, however many hosts image references name. Every agent but
// that of a host listed with allowLocalAddresses refuses local addresses (guarded-connector.ts).
import { createSecureContext, getCACertificates, type SecureContextOptions } from "node:tls";
import { Agent } from "undici";
import { registryConnector } from "./guarded-connector.ts";
import { normalizeRegistryHost, settingsForHost, type RegistrySettings, type RegistrySettingsMap } from "./registry-settings.ts";

export interface AgentTuning {
  /** Connection (TCP + TLS handshake) timeout, ms. */
  connectTimeoutMs: number;
}

export class EndpointAgents {
  readonly #settings: RegistrySettingsMap;
  readonly #tuning: AgentTuning;
  readonly #agents = new Map<string, Agent>();
  #closed = false;

  constructor(settings: RegistrySettingsMap, tuning: AgentTuning) {
    this.#settings = settings;
    this.#tuning = tuning;
  }

  /**
   * The agent for `host`. A host with settings of its own uses them. A host without a CA of its own (a token
   * realm, a blob redirect target, unlisted or listed only for allowLocalAddresses) that `namedBy` sent us to
   * trusts the system roots plus namedBy's CA: a registry with a private CA usually runs its token service or
   * storage under the same CA. Client certificates stay with the host they were configured for.
   */
  forHost(host: string, namedBy?: RegistrySettings): Agent {
    // Called only by http-exchange.ts, whose transportError turns this into a RegistryError naming the message.
    if (this.#closed) throw new Error("the registry client is closed");
    const own = settingsForHost(this.#settings, host);
    const inherited = own?.ca === undefined ? namedBy?.ca : undefined;
    const lender = inherited !== undefined ? `CA of ${normalizeRegistryHost(namedBy!.host)}` : undefined;
    const key = [own ? `host ${own.host}` : undefined, lender].filter((part) => part !== undefined).join(", ") || "default";
    let agent = this.#agents.get(key);
    if (!agent) {
      agent = this.#create(own ?? {}, inherited);
      this.#agents.set(key, agent);
    }
    return agent;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const agents = [...this.#agents.values()];
    this.#agents.clear();
    await Promise.all(agents.map((a) => a.close()));
  }

  #create(own: Partial<RegistrySettings>, inheritedCa: string | undefined): Agent {
    const extraCa = own.ca ?? inheritedCa;
    const connect: { timeout: number; secureContext?: ReturnType<typeof createSecureContext> } = { timeout: this.#tuning.connectTimeoutMs };
    const tlsOptions: SecureContextOptions = {};
    // `ca` replaces Node's trust store, so the defaults (system roots, NODE_EXTRA_CA_CERTS) go in with it.
    if (extraCa !== undefined) tlsOptions.ca = [...getCACertificates("default"), extraCa];
    if (own.clientCert !== undefined && own.clientKey !== undefined) {
      tlsOptions.cert = own.clientCert;
      tlsOptions.key = own.clientKey;
    }
    // One secure context per agent: given bare ca/cert/key, every new connection would parse the whole trust
    // store again (about 10 ms per handshake with the system roots), on the admission path.
    if (Object.keys(tlsOptions).length > 0) connect.secureContext = createSecureContext(tlsOptions);
    // Only a host's own agent can be unguarded: the shared ones serve hosts that nobody listed.
    return new Agent({ connect: registryConnector(connect, own.allowLocalAddresses !== true) });
  }
}
