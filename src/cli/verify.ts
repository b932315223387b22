// `imprimatur verify`: what the webhooks would say about images, signatures included, through the same engine
// (an ImageReview per image, with the server's own credentials): allowed or denied, the digest, who signed.
import { stringify } from "yaml";
import { DEFAULT_SERVER_CONFIG } from "../config/server-config.ts";
import type { Decision } from "../core/decision.ts";
import type { VerifiedImageRecord } from "../core/verification-results.ts";
import { parseImageReference } from "../core/image-reference.ts";
import { NO_NAMESPACE_LABELS } from "../core/namespace-labels.ts";
import type { Engine } from "../engine/engine.ts";
import type { Reviewable } from "../engine/review-routing.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { buildEngine } from "../engine/engine-builder.ts";
import { loadPolicies } from "../policy/load-policies.ts";
import { policyFolders } from "../policy/policy-source.ts";
import { EMBEDDED_POLICIES, errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { structuredViolation } from "./check-report.ts";
import { NAMESPACE_LABELS_SYNTAX, parseNamespaceLabels, withLabels, type NamespaceLabels } from "./namespace-labels-flag.ts";
import { registryAccess } from "./registry-access.ts";
export const VERIFY_USAGE = `Usage: imprimatur verify [--policies DIR] [options] IMAGE...

Judges each image as the webhooks would for a pod in --namespace (a tag that a rule pins is resolved to its
digest first, as /mutate does, and that digest is verified): the ImagePolicies of the policy folder, with
signature verification for rules that have attestors (cosign signatures at sha256-<hex>.sig tags and
Sigstore bundles attached as OCI referrers) and attestation checks (cosign .att statements and attestation
bundles, with their conditions). Signatures and digests are looked up with --authfile's credentials. Prints
one line per image (allowed or denied, the digest, who signed it or why not), one line per attestation
type an allowed image carries, and a summary.

  --policies DIR       policy folder or file (repeatable; default: the embedded default policy)
  -n, --namespace NS   the namespace to judge for (policies bound to namespaces; default "default")
  --namespace-labels ${NAMESPACE_LABELS_SYNTAX}
                       labels of a namespace, for namespaceSelector bindings (repeatable), as for check:
                       --namespace-labels shop:env=prod
  --authfile FILE      registry credentials (the container tools' auth file format)
  --registries FILE    RegistryConfig: per-registry CA, client certificate, insecure (plain HTTP), mirrors, and
                       the hosts on local addresses that may be reached (allowLocalAddresses; others are refused)
  --timeout SECONDS    per image (default 30)
  -o, --output FORMAT  text (default), json or yaml
  -h, --help           show this help

Exit status: 0 every image allowed, 1 some denied, 2 usage, policy or configuration errors.
`;

const OUTPUTS = ["text", "json", "yaml"] as const;

interface ImageResult {
  image: string;
  allowed: boolean;
  digest?: string;
  signers: string[];
  /** Who signed the attestations the deciding rule asked for, by predicate type. */
  attestations?: Record<string, string[]>;
  violations: ReturnType<typeof structuredViolation>[];
  warnings: string[];
}

export async function runVerify(argv: string[]): Promise<number> {
  let values;
  let images: string[];
  let namespaceLabels: NamespaceLabels;
  try {
    const parsed = parseCommandArgs(
      argv,
      {
        policies: { type: "string", multiple: true, default: [] },
        namespace: { type: "string", short: "n", default: "default" },
        "namespace-labels": { type: "string", multiple: true, default: [] },
        authfile: { type: "string" },
        registries: { type: "string" },
        timeout: { type: "string", default: "30" },
        output: { type: "string", short: "o", default: "text" },
      },
      true,
    );
    values = parsed.values;
    images = parsed.positionals;
    namespaceLabels = parseNamespaceLabels(values["namespace-labels"]!);
    if (images.length === 0) throw new UsageError("give at least one image");
    if (!OUTPUTS.includes(values.output as (typeof OUTPUTS)[number]))
      throw new UsageError(`--output must be one of ${OUTPUTS.join(", ")}, got ${values.output}`);
    if (!/^\d+$/.test(values.timeout!) || Number(values.timeout) < 1)
      throw new UsageError(`--timeout must be a whole number of seconds, got ${values.timeout}`);
    for (const image of images) {
      const ref = parseImageReference(image);
      if (!ref.ok) throw new UsageError(ref.error);
    }
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("verify", e.message);
    throw e;
  }

  let engine: Engine;
  try {
    const access = await registryAccess({
      ...(values.registries ? { registries: values.registries } : {}),
      ...(values.authfile ? { authFile: values.authfile } : {}),
    });
    const folders = values.policies!.length > 0 ? values.policies! : [EMBEDDED_POLICIES];
    const { policies } = await loadPolicies(policyFolders(folders));
    engine = await buildEngine({
      config: { ...structuredClone(DEFAULT_SERVER_CONFIG), backends: [] },
      policies,
      ...(namespaceLabels.size > 0 ? { namespaces: withLabels(NO_NAMESPACE_LABELS, namespaceLabels) } : {}),
      ...(access.registries ? { registries: access.registries } : {}),
      ...(access.staticCredentials ? { staticCredentials: access.staticCredentials } : {}),
    });
  } catch (e) {
    process.stderr.write(`imprimatur verify: ${errorText(e)}\n`);
    return 2;
  }

  const results: ImageResult[] = [];
  try {
    for (const image of images) {
      // As the cluster judges a pod: /mutate first (it pins tags that rules verify), then /validate on the result.
      const deadline = Date.now() + Number(values.timeout) * 1000;
      const { decision: mutated } = await engine.review(podRunning(image, values.namespace!), { endpoint: "mutate", deadline, dryRun: true });
      const pin = mutated?.patches?.find((p) => p.path === "/spec/containers/0/image")?.value;
      const judged = typeof pin === "string" ? pin : image;
      const decision = mutated && !mutated.allowed ? mutated : await validated(engine, podRunning(judged, values.namespace!), deadline);
      const record = decision.auditAnnotations["verified-images"];
      const verified = record ? (JSON.parse(record) as Record<string, VerifiedImageRecord>)[judged] : undefined;
      results.push({
        image,
        allowed: decision.allowed,
        ...(verified ? { digest: verified.digest } : {}),
        signers: verified?.signers ?? [],
        ...(verified?.attestations ? { attestations: verified.attestations } : {}),
        violations: decision.violations.map(structuredViolation),
        warnings: decision.warnings,
      });
    }
  } finally {
    await engine.close();
  }

  const denied = results.filter((r) => !r.allowed).length;
  const summary = { images: results.length, allowed: results.length - denied, denied };
  if (values.output === "json") process.stdout.write(`${JSON.stringify({ results, summary }, null, 2)}\n`);
  else if (values.output === "yaml") process.stdout.write(stringify({ results, summary }));
  else {
    for (const r of results) {
      const digest = r.digest ? ` ${r.digest}` : "";
      if (r.allowed) {
        process.stdout.write(`ALLOWED ${r.image}${digest}${r.signers.length > 0 ? `: signed by ${r.signers.join("; ")}` : ""}\n`);
        for (const [type, signers] of Object.entries(r.attestations ?? {}))
          process.stdout.write(`        attestation ${type}: signed by ${signers.join("; ")}\n`);
      } else for (const v of r.violations) process.stdout.write(`DENIED  ${r.image}${digest}: policy ${v.policy} ${v.rule}: ${v.message}\n`);
      for (const w of r.warnings) process.stdout.write(`WARNING ${r.image}: ${w}\n`);
    }
    process.stdout.write(`${summary.images} image${summary.images === 1 ? "" : "s"}: ${summary.allowed} allowed, ${summary.denied} denied\n`);
  }
  return denied > 0 ? 1 : 0;
}

/** A pod in the namespace that runs the image in one container: what the webhooks see. */
function podRunning(image: string, namespace: string): Reviewable {
  return {
    kind: "object",
    object: { apiVersion: "v1", kind: "Pod", metadata: { name: "verify", namespace }, spec: { containers: [{ name: "image", image }] } },
  };
}

/** The /validate decision on a pod; a pod always gets one. */
async function validated(engine: Engine, pod: Reviewable, deadline: number): Promise<Decision> {
  const { decision, skipped } = await engine.review(pod, { endpoint: "check", deadline, dryRun: true });
  if (!decision) throw new ImprimaturError("internal", `a pod was not reviewed (${skipped ?? "no decision"})`);
  return decision;
}
