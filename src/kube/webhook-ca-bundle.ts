// The caBundle of Imprimatur's own webhook configurations: the Validating- and MutatingWebhookConfiguration of
// one name. Read to see which CAs kube-apiserver trusts for the webhooks; written, for every webhook in them, when
// the CA bundle changes. A configuration that does not exist is skipped (not installed, or only one of the two).
// Writes carry the resourceVersion read, so an edit made meanwhile (kubectl apply) is not overwritten blindly.
import {
  AdmissionregistrationV1Api,
  type KubeConfig,
  type V1MutatingWebhookConfiguration,
  type V1ValidatingWebhookConfiguration,
} from "@kubernetes/client-node";
import { hasStatus } from "./api-requests.ts";

export type WebhookConfigurationKind = "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration";

export interface WebhookCaBundles {
  /** The configurations of that name that exist. */
  found: WebhookConfigurationKind[];
  /** Every webhook's caBundle, decoded PEM ("" when unset). */
  bundles: string[];
}

type AnyConfiguration = V1ValidatingWebhookConfiguration | V1MutatingWebhookConfiguration;

export class WebhookCaBundleClient {
  private readonly api: AdmissionregistrationV1Api;
  private readonly name: string;

  constructor(kube: KubeConfig, configurationName: string) {
    this.api = kube.makeApiClient(AdmissionregistrationV1Api);
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
      for (const webhook of config.webhooks ?? []) bundles.push(Buffer.from(webhook.clientConfig.caBundle ?? "", "base64").toString("utf8"));
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
    const toWrite: Array<[WebhookConfigurationKind, AnyConfiguration]> = [];
    for (const kind of KINDS) {
      const config = await this.get(kind);
      if (config === undefined) continue;
      const webhooks = config.webhooks ?? [];
      if (webhooks.every((w) => w.clientConfig.caBundle === encoded)) continue;
      for (const webhook of webhooks) webhook.clientConfig.caBundle = encoded;
      toWrite.push([kind, config]);
    }
    if (toWrite.length === 0) return [];
    if (opts.stillCurrent !== undefined && !(await opts.stillCurrent())) return "stale";
    for (const [kind, config] of toWrite) await this.replace(kind, config);
    return toWrite.map(([kind]) => kind);
  }

  private async get(kind: WebhookConfigurationKind): Promise<AnyConfiguration | undefined> {
    try {
      return kind === "ValidatingWebhookConfiguration"
        ? await this.api.readValidatingWebhookConfiguration({ name: this.name })
        : await this.api.readMutatingWebhookConfiguration({ name: this.name });
    } catch (err) {
      if (hasStatus(err, 404)) return undefined;
      throw err;
    }
  }

  private async replace(kind: WebhookConfigurationKind, config: AnyConfiguration): Promise<void> {
    if (kind === "ValidatingWebhookConfiguration")
      await this.api.replaceValidatingWebhookConfiguration({ name: this.name, body: config as V1ValidatingWebhookConfiguration });
    else await this.api.replaceMutatingWebhookConfiguration({ name: this.name, body: config as V1MutatingWebhookConfiguration });
  }
}

const KINDS: WebhookConfigurationKind[] = ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"];
