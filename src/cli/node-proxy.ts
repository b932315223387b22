// `imprimatur node-proxy`: the node-side CRI image-service proxy (KEP-2535) the kubelet is pointed at with
// --image-service-endpoint, in front of the container runtime's image service.
import type { Server } from "node:http";
import * as grpc from "@grpc/grpc-js";
import {
  DEFAULT_VERIFICATION_POLICY,
  parseAllowlistPattern,
  VERIFICATION_POLICIES,
  type AllowlistPattern,
  type VerificationPolicy,
} from "../core/pull-verification/verification-policy.ts";
import { RuntimeImageClient, startImageServiceProxy } from "../cri/image-service-proxy.ts";
import { createNodeMetrics } from "../node/node-metrics.ts";
import { NodeImageProxy } from "../node/node-image-proxy.ts";
import { PodPullSecrets } from "../node/pod-pull-secrets.ts";
import { loadKubeClient } from "../kube/kube-connection.ts";
import { RecordStore } from "../node/record-store.ts";
import { createServerLogger } from "../server/logger.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import type { Logger } from "pino";
import { buildNodeEngine } from "../node/node-engine.ts";
import { NodePolicies } from "../node/node-policies.ts";
import { PullGate } from "../node/pull-gate.ts";
import { VERIFY_PRESENT_MODES, type PullVerification, type VerifyPresent } from "../node/node-image-proxy.ts";
import { PolicyFolder } from "../policy/policy-source.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import { policyResourceSource } from "../policy-resources/resource-watch.ts";
import { NamespaceLabelCache } from "../kube/namespace-label-cache.ts";
import { AuditLog } from "../audit/audit-log.ts";
import { join } from "node:path";
import { registryAccess } from "./registry-access.ts";
import { errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { DEFAULT_NODE_STATE_DIR } from "./node-records.ts";

// Taken, not imported: an import of node:http loads Node.js's own undici (eslint.config.js).
const { createServer } = process.getBuiltinModule("node:http");

export const NODE_PROXY_USAGE = `Usage: imprimatur node-proxy --listen unix://PATH --runtime-endpoint unix://SOCKET [--state-dir DIR] [options]

A CRI image service between the kubelet and the container runtime, so that a pod may use an image already on
the node only with credentials that were accepted for it (KEP-2535, "Ensure Secret Pulled Images", for kubelets
without it). Point the kubelet's --image-service-endpoint at --listen; its --container-runtime-endpoint stays on
the runtime. Serves CRI runtime.v1alpha2 and runtime.v1.

  --listen ENDPOINT                 where the kubelet connects (unix://PATH)
  --runtime-endpoint ENDPOINT       the runtime's CRI socket, e.g. unix:///run/containerd/containerd.sock
  --state-dir DIR                   pull records, intents and the node-local credential key (created 0700;
                                    default ${DEFAULT_NODE_STATE_DIR})
  --verification-policy POLICY      NeverVerify, NeverVerifyPreloadedImages (default), NeverVerifyAllowlistedImages
                                    or AlwaysVerify, as the kubelet's imagePullCredentialsVerificationPolicy
  --preloaded-allowlist PATTERN     a preloaded image that needs no credentials under NeverVerifyAllowlistedImages:
                                    a repository (registry.example.com/base) or a prefix (registry.example.com/base/*);
                                    repeatable
  --metrics-address HOST:PORT       serve Prometheus metrics at http://HOST:PORT/metrics (default: none)
  --kubeconfig FILE                 with --node-name: read the pods bound to this node and their pull secrets
                                    (the node's own identity suffices), so a pod is matched by its Secrets
                                    before it must pull: the only way imagePullPolicy: Never pods can show them;
                                    and a pull is answered from the records only for a pod the API shows not
                                    pulling that image Always (without it, every such pull goes to the registry)
  --node-name NAME                  this node's name in the API

Verification at pull time (the same policies the webhook loads, for pulls admission never sees: static pods,
pods admitted while the webhook failed open, tags that moved, images preloaded on the node):
  --policies DIR                    judge every PullImage by the policies in DIR (a folder or a file, as serve reads
                                    them): the tag is resolved with the pull's own credentials, the pod in the
                                    pull's sandbox judged with the image at that digest, and the runtime pulls the
                                    digest; a refused pull fails with the reason (the pod shows ErrImagePull)
  --policy-crds                     with --kubeconfig: judge pulls by the policy custom resources too (read only)
  --failure-policy POLICY           Fail (default: a registry that gives no answer refuses the pull) or Ignore
                                    (the pull goes on unverified, logged)
  --verify-present MODE             IfNotVerified (default): an image on the node that the asking pod has not had
                                    verified under the policies in force is reported absent, so the kubelet pulls it
                                    and the pull is judged; Never: images on the node are used as they are
  --registries FILE                 RegistryConfig: per-registry CA, client certificate, mirrors (as serve's)
  --authfile FILE                   the node's own registry credentials, tried after the pull's
  --cluster-name NAME               this node's cluster, for policies scoped with spec.clusters (as serve's);
                                    without it, only policies scoped to no cluster apply
  --exceptions-namespace NS         honour the PolicyExceptions of this namespace (repeatable; as serve's): none
                                    by default, since whoever may write one there may exempt any pull
  --audit-log FILE                  every pull judged, one JSON line each, fsynced before the pull goes on (default
                                    audit.log in --state-dir); a pull that cannot be recorded is refused

Images on the node when the proxy first runs count as preloaded: the first start that completes lists them
(preloaded-images.json); a start that fails before that (the runtime not up yet at boot) leaves the next one
first. Logs are JSON lines on standard output (IMPRIMATUR_LOG_LEVEL=debug for every decision). "imprimatur
node-records" lists the records. Exit status: 0 after SIGTERM or SIGINT, 2 on usage or start-up errors (the
runtime not answering included: a service manager starts it again).
`;

interface NodeProxyArgs {
  listen: string;
  runtime: string;
  stateDir: string;
  policy: VerificationPolicy;
  allowlist: AllowlistPattern[];
  metricsAddress?: { host: string; port: number };
  api?: { kubeconfig: string; nodeName: string };
  /** Verification at pull time: where the policies come from, and how it behaves. */
  verify?: {
    policies?: string;
    policyCrds: boolean;
    failOpen: boolean;
    verifyPresent: VerifyPresent;
    registries?: string;
    authFile?: string;
    auditLog: string;
    clusterName?: string;
    exceptionNamespaces: string[];
  };
}

function parseNodeProxyArgs(argv: string[]): NodeProxyArgs {
  const { values } = parseCommandArgs(argv, {
    listen: { type: "string" },
    "runtime-endpoint": { type: "string" },
    "state-dir": { type: "string", default: DEFAULT_NODE_STATE_DIR },
    "verification-policy": { type: "string", default: DEFAULT_VERIFICATION_POLICY },
    "preloaded-allowlist": { type: "string", multiple: true, default: [] },
    "metrics-address": { type: "string" },
    kubeconfig: { type: "string" },
    "node-name": { type: "string" },
    policies: { type: "string" },
    "policy-crds": { type: "boolean" },
    "failure-policy": { type: "string" },
    "verify-present": { type: "string" },
    registries: { type: "string" },
    authfile: { type: "string" },
    "audit-log": { type: "string" },
    "cluster-name": { type: "string" },
    "exceptions-namespace": { type: "string", multiple: true },
  });
  for (const flag of ["listen", "runtime-endpoint"] as const) if (!values[flag]) throw new UsageError(`--${flag} is required`);
  for (const flag of ["listen", "runtime-endpoint"] as const) {
    if (!/^unix:\/\/\/./.test(values[flag]!)) throw new UsageError(`--${flag} must be unix:///absolute/path, got ${values[flag]}`);
  }
  const policy = values["verification-policy"]!;
  if (!(VERIFICATION_POLICIES as readonly string[]).includes(policy))
    throw new UsageError(`--verification-policy must be one of ${VERIFICATION_POLICIES.join(", ")}, got ${policy}`);
  const allowlist = values["preloaded-allowlist"]!.map((p) => {
    const parsed = parseAllowlistPattern(p);
    if ("error" in parsed) throw new UsageError(`--preloaded-allowlist ${parsed.error}`);
    return parsed;
  });
  if (allowlist.length > 0 && policy !== "NeverVerifyAllowlistedImages")
    throw new UsageError("--preloaded-allowlist applies only with --verification-policy NeverVerifyAllowlistedImages");
  if ((values.kubeconfig === undefined) !== (values["node-name"] === undefined)) throw new UsageError("--kubeconfig and --node-name go together");
  let metricsAddress: NodeProxyArgs["metricsAddress"];
  if (values["metrics-address"] !== undefined) {
    const m = /^(.+):(\d{1,5})$/.exec(values["metrics-address"]);
    if (!m || Number(m[2]) > 65535) throw new UsageError(`--metrics-address must be HOST:PORT, got ${values["metrics-address"]}`);
    metricsAddress = { host: m[1]!.replace(/^\[(.*)\]$/, "$1"), port: Number(m[2]) };
  }
  const verifying = values.policies !== undefined || values["policy-crds"] === true;
  if (!verifying)
    for (const flag of ["failure-policy", "verify-present", "registries", "authfile", "audit-log", "cluster-name", "exceptions-namespace"] as const)
      if (values[flag] !== undefined) throw new UsageError(`--${flag} applies only with --policies or --policy-crds`);
  if (values["policy-crds"] && !values.kubeconfig) throw new UsageError("--policy-crds needs --kubeconfig (and --node-name)");
  const failurePolicy = values["failure-policy"] ?? "Fail";
  if (failurePolicy !== "Fail" && failurePolicy !== "Ignore") throw new UsageError(`--failure-policy must be Fail or Ignore, got ${failurePolicy}`);
  const verifyPresent = values["verify-present"] ?? "IfNotVerified";
  if (!(VERIFY_PRESENT_MODES as readonly string[]).includes(verifyPresent))
    throw new UsageError(`--verify-present must be one of ${VERIFY_PRESENT_MODES.join(", ")}, got ${verifyPresent}`);
  return {
    listen: values.listen!,
    runtime: values["runtime-endpoint"]!,
    stateDir: values["state-dir"]!,
    policy: policy as VerificationPolicy,
    allowlist,
    ...(metricsAddress ? { metricsAddress } : {}),
    ...(values.kubeconfig ? { api: { kubeconfig: values.kubeconfig, nodeName: values["node-name"]! } } : {}),
    ...(verifying
      ? {
          verify: {
            ...(values.policies !== undefined ? { policies: values.policies } : {}),
            policyCrds: values["policy-crds"] === true,
            failOpen: failurePolicy === "Ignore",
            verifyPresent: verifyPresent as VerifyPresent,
            ...(values.registries !== undefined ? { registries: values.registries } : {}),
            ...(values.authfile !== undefined ? { authFile: values.authfile } : {}),
            auditLog: values["audit-log"] ?? join(values["state-dir"]!, "audit.log"),
            ...(values["cluster-name"] !== undefined ? { clusterName: values["cluster-name"] } : {}),
            exceptionNamespaces: values["exceptions-namespace"] ?? [],
          },
        }
      : {}),
  };
}

export async function runNodeProxy(argv: string[]): Promise<number> {
  let args: NodeProxyArgs;
  try {
    args = parseNodeProxyArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    return usageFailure("node-proxy", e.message);
  }
  const { logger, flush } = createServerLogger();
  let store: RecordStore | undefined;
  const metrics = createNodeMetrics(() => store);
  const runtime = new RuntimeImageClient(args.runtime);
  let proxy: NodeImageProxy;
  let server: Awaited<ReturnType<typeof startImageServiceProxy>>;
  let metricsServer: Server | undefined;
  let verifying: StartedVerification | undefined;
  try {
    store = await RecordStore.open(args.stateDir);
    const kube = args.api ? loadKubeClient(args.api.kubeconfig) : undefined;
    const podSecrets = args.api && kube ? new PodPullSecrets({ kube, nodeName: args.api.nodeName, key: store.key, logger }) : undefined;
    if (args.verify) verifying = await startVerification(args.verify, kube, logger);
    proxy = new NodeImageProxy({
      store,
      runtime,
      policy: args.policy,
      allowlist: args.allowlist,
      logger,
      metrics,
      ...(podSecrets ? { podSecrets } : {}),
      ...(verifying ? { verification: verifying.verification } : {}),
    });
    await proxy.start();
    server = await startImageServiceProxy(args.listen, runtime, proxy.handle);
    if (args.metricsAddress) metricsServer = await serveMetrics(args.metricsAddress, () => metrics.registry.metrics(), metrics.registry.contentType);
  } catch (e) {
    await verifying?.close();
    if (e instanceof PolicyLoadError) {
      process.stderr.write(`imprimatur node-proxy: refusing to start: ${e.message}\n`);
      runtime.close();
      return 2;
    }
    process.stderr.write(`imprimatur node-proxy: ${startProblem(e, args.runtime)}\n`);
    if (store?.snapshot === "due")
      process.stderr.write("imprimatur node-proxy: no start has completed yet: the next start records the images then on the node as preloaded\n");
    runtime.close();
    return 2;
  }
  logger.info(
    {
      listen: args.listen,
      runtime: args.runtime,
      stateDir: args.stateDir,
      verificationPolicy: args.policy,
      records: store.counts().pulled,
      ...(verifying
        ? {
            pullsVerified: true,
            policyGeneration: verifying.verification.policies().generation,
            failurePolicy: args.verify!.failOpen ? "Ignore" : "Fail",
            verifyPresent: args.verify!.verifyPresent,
          }
        : {}),
    },
    "node proxy serving",
  );
  await new Promise<void>((resolve) => {
    process.once("SIGTERM", () => resolve());
    process.once("SIGINT", () => resolve());
  });
  await server.close();
  await proxy.stop();
  await verifying?.close();
  metricsServer?.close();
  runtime.close();
  logger.info("node proxy stopped");
  flush();
  return 0;
}

interface StartedVerification {
  verification: PullVerification;
  close(): Promise<void>;
}

/** The policies loaded (and watched), the engine built from them, and the gate that judges pulls with it. */
async function startVerification(opts: NonNullable<NodeProxyArgs["verify"]>, kube: KubeClient | undefined, logger: Logger): Promise<StartedVerification> {
  const folder = opts.policies !== undefined ? new PolicyFolder(opts.policies) : undefined;
  const resources =
    opts.policyCrds && kube
      ? policyResourceSource(kube, { logger, writeStatus: false, exceptionNamespaces: opts.exceptionNamespaces, ...(folder ? { folder } : {}) })
      : undefined;
  const source = resources?.source ?? folder!;
  const policies = new NodePolicies(source, logger);
  const audit = new AuditLog(opts.auditLog, {
    onTornLine: (repair) =>
      logger.warn({ auditLog: opts.auditLog, ...repair }, "the audit log ended in an unfinished record (a crash while writing it); moved aside"),
  });
  // With API access, namespace labels for policies with a namespaceSelector (without, such policies cannot decide).
  let namespaces = kube ? new NamespaceLabelCache(kube, { logger }) : undefined;
  try {
    try {
      await namespaces?.start();
    } catch (err) {
      // A node whose identity may not list namespaces (deploy/node-proxy/rbac.yaml not applied) still verifies.
      logger.warn({ err }, "namespace labels cannot be read: policies with a namespaceSelector refuse every pull they would judge");
      await namespaces?.close();
      namespaces = undefined;
    }
    const first = await policies.first(opts.policyCrds);
    const access = await registryAccess({ ...(opts.registries ? { registries: opts.registries } : {}), ...(opts.authFile ? { authFile: opts.authFile } : {}) });
    const engine = await buildNodeEngine({
      policies: first.set,
      failOpen: opts.failOpen,
      logger,
      auditLog: audit,
      ...(opts.clusterName ? { clusterName: opts.clusterName } : {}),
      exceptionNamespaces: opts.exceptionNamespaces,
      ...(namespaces ? { namespaces } : {}),
      ...access,
    });
    policies.watch((next) => engine.setPolicies(next.set));
    const gate = new PullGate({
      engine,
      failOpen: opts.failOpen,
      logger,
      audit,
      ...(access.staticCredentials ? { staticCredentials: access.staticCredentials } : {}),
    });
    return {
      verification: {
        gate,
        verifyPresent: opts.verifyPresent,
        policies: () => {
          const { generation, everyPod } = policies.current();
          return { generation, everyPod };
        },
      },
      close: async () => {
        policies.close();
        await engine.close();
        await resources?.close();
        await namespaces?.close();
        await audit.close();
      },
    };
  } catch (e) {
    policies.close();
    await resources?.close();
    await namespaces?.close();
    await audit.close();
    throw e;
  }
}

/** Why the start failed, in one sentence: a runtime that cannot be reached is named with the reason, not gRPC's status text. */
export function startProblem(e: unknown, runtime: string): string {
  const { code, details } = e as { code?: unknown; details?: unknown };
  if (typeof code !== "number" || typeof details !== "string" || !(e instanceof Error)) return errorText(e);
  if (code === grpc.status.UNAVAILABLE || code === grpc.status.DEADLINE_EXCEEDED) {
    const socket = runtime.replace(/^unix:\/\//, "");
    const reason = /\bENOENT\b/.test(details)
      ? `there is no socket at ${socket}`
      : /\bECONNREFUSED\b/.test(details)
        ? `nothing accepts connections on ${socket}`
        : /\bEACCES\b|\bEPERM\b/.test(details)
          ? `permission denied on ${socket}`
          : /\bENOTSOCK\b/.test(details)
            ? `${socket} is not a socket`
            : "it gave no answer in time";
    return `the container runtime at ${runtime} is not answering (${reason}): start the runtime first, then start the proxy again`;
  }
  // It answered, with an error: the call and gRPC's status name say what it refused.
  return `the container runtime at ${runtime} answered with an error: ${grpc.status[code] ?? code}: ${details}`;
}

function serveMetrics(at: { host: string; port: number }, text: () => Promise<string>, contentType: string): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method === "GET" && (req.url ?? "").split("?")[0] === "/metrics") {
      text().then(
        (body) => res.writeHead(200, { "content-type": contentType }).end(body),
        () => res.writeHead(500).end(),
      );
    } else res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(at.port, at.host, () => resolve(server));
  });
}
