// The caBundle of Imprimatur's own webhook configurations: the Validating- and MutatingWebhookConfiguration of
// one name. Read to see which CAs kube-apiserver trusts for the webhooks; written, for every webhook in them, when
// the CA bundle changes. A configuration that does not exist is skipped (not installed, or only one of the two).
// Writes carry the resourceVersion read, so an edit made meanwhile (kubectl apply) is not overwritten blindly.
import type { KubeClient } from "./kube-client.ts";

export type WebhookConfigurationKind = "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration";

export interface WebhookCaBundles {
  /** The configurations of that name that exist. */
  found: WebhookConfigurationKind[];
  /** Every webhook's caBundle, decoded PEM ("" when unset). */
  bundles: string[];
}

/** A webhook configuration as read: written back whole, with only the caBundles changed. */
interface WebhookConfiguration {
  webhooks?: Array<{ clientConfig?: { caBundle?: string } }>;
}

export class WebhookCaBundleClient {
  private readonly kube: KubeClient;
  private readonly name: string;

  constructor(kube: KubeClient, configurationName: string) {
    this.kube = kube;
    this.name = configurationName;
  }

  get configurationName(): string {
    return this.name;
  }

  async read(): Promise<WebhookCaBundles> {
    const found: WebhookConfigurationKind[] = [];
    const bundles: string[] = [];
    for (const kind of KINDS) {
      const config = await this.get(kind);
      if (config === undefined) continue;
      found.push(kind);
      for (const webhook of config.webhooks ?? []) bundles.push(Buffer.from(webhook.clientConfig?.caBundle ?? "", "base64").toString("utf8"));
    }
    return { found, bundles };
  }

  /**
   * Sets every webhook's caBundle to `bundlePem`; returns the configurations it changed, or "stale" without writing
   * when `stillCurrent` (asked after the configurations were read, before anything is written) says the source of
   * the bundle moved on. The writes carry the resourceVersions of that read: a bundle someone wrote after the check
   * makes the write fail (409) rather than be overwritten, and one written before it fails the check.
   */
  async write(bundlePem: string, opts: { stillCurrent?: () => Promise<boolean> } = {}): Promise<WebhookConfigurationKind[] | "stale"> {
    const encoded = Buffer.from(bundlePem, "utf8").toString("base64");
    const toWrite: Array<[WebhookConfigurationKind, WebhookConfiguration]> = [];
    for (const kind of KINDS) {
      const config = await this.get(kind);
      if (config === undefined) continue;
      const webhooks = config.webhooks ?? [];
      if (webhooks.every((w) => w.clientConfig?.caBundle === encoded)) continue;
      for (const webhook of webhooks) (webhook.clientConfig ??= {}).caBundle = encoded;
      toWrite.push([kind, config]);
    }
    if (toWrite.length === 0) return [];
    if (opts.stillCurrent !== undefined && !(await opts.stillCurrent())) return "stale";
    for (const [kind, config] of toWrite) await this.replace(kind, config);
    return toWrite.map(([kind]) => kind);
  }

  private async get(kind: WebhookConfigurationKind): Promise<WebhookConfiguration | undefined> {
    return (await this.kube.read(this.path(kind))) as WebhookConfiguration | undefined;
  }

  private async replace(kind: WebhookConfigurationKind, config: WebhookConfiguration): Promise<void> {
    await this.kube.request("PUT", this.path(kind), { body: config });
  }

  private path(kind: WebhookConfigurationKind): string {
    const plural = kind === "ValidatingWebhookConfiguration" ? "validatingwebhookconfigurations" : "mutatingwebhookconfigurations";
    return `/apis/admissionregistration.k8s.io/v1/${plural}/${encodeURIComponent(this.name)}`;
  }
}

const KINDS: WebhookConfigurationKind[] = ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"];
