// A third-party ImageReview backend, reached the way kube-apiserver's ImagePolicyWebhook reaches one:
// POST the ImageReview to the kubeconfig's cluster server URL, with its CA, client certificate or token.
import { request, type Agent } from "undici";
import { deny, allow, type Decision } from "../core/decision.ts";
import { IMAGE_REVIEW_API_VERSION, IMAGE_REVIEW_KIND, type ImageReviewSpec } from "../core/image-review.ts";
import { BackendUnavailableError, type RemoteImageReviewBackend, type ReviewCall } from "./backend.ts";
import { loadWebhookKubeconfig, webhookDispatcher, type WebhookTarget } from "./kubeconfig.ts";

const MAX_RESPONSE_BYTES = 1024 * 1024;

export interface WebhookBackendConfig {
  name: string;
  kubeconfig: string;
  /** Per-attempt timeout; the admission deadline bounds it further. */
  timeoutMs: number;
}

export class WebhookBackend implements RemoteImageReviewBackend {
  readonly name: string;
  private readonly target: WebhookTarget;
  private readonly agent: Agent;
  private readonly timeoutMs: number;

  private constructor(name: string, target: WebhookTarget, timeoutMs: number) {
    this.name = name;
    this.target = target;
    this.timeoutMs = timeoutMs;
    this.agent = webhookDispatcher(target);
  }

  static async fromConfig(config: WebhookBackendConfig): Promise<WebhookBackend> {
    return new WebhookBackend(config.name, await loadWebhookKubeconfig(config.kubeconfig), config.timeoutMs);
  }

  async review(spec: ImageReviewSpec, call: ReviewCall): Promise<Decision> {
    const timeout = Math.max(1, Math.min(this.timeoutMs, call.deadline - Date.now()));
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    if (this.target.token) headers.authorization = `Bearer ${this.target.token}`;
    let res;
    try {
      res = await request(this.target.url, {
        method: "POST",
        dispatcher: this.agent,
        headers,
        body: JSON.stringify({ apiVersion: IMAGE_REVIEW_API_VERSION, kind: IMAGE_REVIEW_KIND, spec }),
        signal: AbortSignal.any([call.signal, AbortSignal.timeout(timeout)]),
        headersTimeout: timeout,
        bodyTimeout: timeout,
      });
    } catch (e) {
      throw new BackendUnavailableError(isTimeout(e) ? "timeout" : "unreachable", describeNetworkError(e), { cause: e });
    }
    const text = await readLimited(res.body, MAX_RESPONSE_BYTES).catch((e: unknown) => {
      if (e instanceof BackendUnavailableError) throw e;
      throw new BackendUnavailableError(isTimeout(e) ? "timeout" : "unreachable", `reading response: ${(e as Error).message}`, { cause: e });
    });
    if (res.statusCode < 200 || res.statusCode >= 300) {
      const retryable = res.statusCode >= 500 || res.statusCode === 429;
      const said = text.trim().split("\n")[0]!.trim().slice(0, 200);
      throw new BackendUnavailableError("http-status", `HTTP ${res.statusCode}${said ? `: ${said}` : ""}`, { retryable, status: res.statusCode });
    }
    return interpretStatus(this.name, text);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** The backend's ImageReview status → a Decision. A malformed answer is an answer, but gives no verdict. */
export function interpretStatus(name: string, text: string): Decision {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BackendUnavailableError("bad-response", "the answer is not JSON");
  }
  const status = (body as { status?: unknown } | null)?.status as Record<string, unknown> | undefined;
  if (typeof status !== "object" || status === null || typeof status.allowed !== "boolean") {
    throw new BackendUnavailableError("bad-response", "the answer has no status.allowed boolean");
  }
  const auditAnnotations: Record<string, string> = {};
  if (typeof status.auditAnnotations === "object" && status.auditAnnotations !== null) {
    for (const [k, v] of Object.entries(status.auditAnnotations)) {
      if (typeof v === "string") auditAnnotations[`backend.${name}.${k}`] = v;
    }
  }
  const reason = typeof status.reason === "string" && status.reason ? status.reason : "denied (no reason given)";
  return status.allowed ? allow({ auditAnnotations }) : deny([{ policy: `backend/${name}`, rule: "imageReview", message: reason }], { auditAnnotations });
}

function isTimeout(e: unknown): boolean {
  const err = e as { name?: string; code?: string } | null;
  return err?.name === "AbortError" || err?.name === "TimeoutError" || err?.code === "UND_ERR_HEADERS_TIMEOUT" || err?.code === "UND_ERR_BODY_TIMEOUT";
}

function describeNetworkError(e: unknown): string {
  if (isTimeout(e)) return "timed out";
  const err = e as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  return err.cause?.code ?? err.code ?? err.cause?.message ?? err.message ?? String(e);
}

async function readLimited(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    // Retryable: an oversized answer may be a passing fault of that backend.
    if (size > limit) throw new BackendUnavailableError("bad-response", `the answer is larger than ${limit} bytes`, { retryable: true });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}
