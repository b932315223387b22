// A CRI image service (runtime.v1alpha2 and runtime.v1, which share their image messages) in front of the
// container runtime's, on @grpc/grpc-js. Messages travel as raw bytes: a call the proxy does not change is
// forwarded exactly as received (decoding and re-encoding would drop fields this project does not declare,
// which newer kubelets send), and the runtime's errors come back unchanged (the kubelet parses some of their
// messages). Deadlines and cancellation reach the runtime; messages up to 16 MiB pass, as with the kubelet.
import { chmod, lstat, rm } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import * as grpc from "@grpc/grpc-js";
import { CriError } from "./cri-error.ts";
import { withValidAuthority } from "./unix-authority.ts";

export const CRI_PACKAGES = ["runtime.v1alpha2", "runtime.v1"] as const;
export type CriPackage = (typeof CRI_PACKAGES)[number];
export const IMAGE_METHODS = ["ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo"] as const;
export type ImageMethod = (typeof IMAGE_METHODS)[number];

/** The kubelet's own limit for CRI messages. */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export const CHANNEL_OPTIONS = {
  "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
  "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
};

const identity = (b: Buffer): Buffer => b;

/** One call as the proxy sees it: the raw request and what forwarding it needs. */
export interface ImageCall {
  pkg: CriPackage;
  method: ImageMethod;
  request: Buffer;
  /** Aborted when the caller cancels or its deadline passes. */
  signal: AbortSignal;
  /** Sends `request` (by default the call's own bytes) to the runtime, in the caller's package and deadline. */
  forward(request?: Buffer): Promise<Buffer>;
}

/** Answers a call: the raw response. A rejection with a gRPC status (`{code, details}`) is returned as that status. */
export type ImageCallHandler = (call: ImageCall) => Promise<Buffer>;

/** A unary client of the runtime's image service, bytes in and out. */
export class RuntimeImageClient {
  private readonly client: grpc.Client;

  constructor(endpoint: string) {
    this.client = new grpc.Client(endpoint, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  }

  /**
   * Rejects with the runtime's grpc.ServiceError (code, details, metadata) when it answers with an error. Cancelled
   * by an ImageCall's `signal`, it rejects with the status that ended the caller's call (CANCELLED or DEADLINE_EXCEEDED).
   */
  call(
    pkg: CriPackage,
    method: ImageMethod,
    request: Buffer,
    opts: { deadline?: grpc.Deadline; signal?: AbortSignal; metadata?: grpc.Metadata } = {},
  ): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const callOptions: grpc.CallOptions = opts.deadline !== undefined && opts.deadline !== Infinity ? { deadline: opts.deadline } : {};
      const call = this.client.makeUnaryRequest(
        `/${pkg}.ImageService/${method}`,
        identity,
        identity,
        request,
        opts.metadata ?? new grpc.Metadata(),
        callOptions,
        (err: grpc.ServiceError | null, response?: Buffer) => {
          opts.signal?.removeEventListener("abort", cancel);
          if (err) reject(err.code === grpc.status.CANCELLED && opts.signal?.aborted ? endedBy(opts.signal.reason, err) : err);
          else resolve(response ?? Buffer.alloc(0));
        },
      );
      const cancel = () => call.cancel();
      if (opts.signal?.aborted) call.cancel();
      else opts.signal?.addEventListener("abort", cancel, { once: true });
    });
  }

  close(): void {
    this.client.close();
  }
}

/** One package's image service as raw bytes in and out: every method unary, nothing decoded. */
export function imageServiceDefinition(pkg: CriPackage): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  for (const method of IMAGE_METHODS) {
    definition[method] = {
      path: `/${pkg}.ImageService/${method}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    };
  }
  return definition as grpc.ServiceDefinition;
}

export interface ProxyServer {
  close(): Promise<void>;
}

/**
 * Serves both CRI packages' image services on `listen` ("unix:///path"), each call through `handler`. A stale
 * socket file (left by a killed proxy) is replaced.
 */
export async function startImageServiceProxy(listen: string, runtime: RuntimeImageClient, handler: ImageCallHandler): Promise<ProxyServer> {
  const server = new grpc.Server(CHANNEL_OPTIONS);
  for (const pkg of CRI_PACKAGES) {
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const method of IMAGE_METHODS) {
      implementation[method] = ((call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
        const abort = new AbortController();
        const deadline = call.getDeadline();
        call.on("cancelled", () => abort.abort(endOfCall(deadline)));
        const imageCall: ImageCall = {
          pkg,
          method,
          request: call.request,
          signal: abort.signal,
          forward: (request = call.request) => runtime.call(pkg, method, request, { deadline, signal: abort.signal, metadata: call.metadata.clone() }),
        };
        handler(imageCall).then(
          (response) => callback(null, response),
          (err: unknown) => callback(asStatus(err)),
        );
      }) as grpc.handleUnaryCall<Buffer, Buffer>;
    }
    server.addService(imageServiceDefinition(pkg), implementation);
  }
  // Connections are accepted here, not by grpc-js, so that older kubelets' authorities can be made valid.
  const injector = server.createConnectionInjector(grpc.ServerCredentials.createInsecure());
  const path = socketPath(listen);
  await removeStaleSocket(path);
  const sockets = new Set<Socket>();
  const listener = createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    injector.injectConnection(withValidAuthority(socket));
  });
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(path, () => {
      listener.off("error", reject);
      resolve();
    });
  });
  await chmod(path, 0o660); // the kubelet runs as root; nobody else needs the socket
  return {
    close: async () => {
      listener.close();
      await new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        // Calls still in flight after a moment (a pull can take minutes) are cut off.
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2_000).unref();
      });
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** The reason an ImageCall's signal is aborted with: the status that ended the caller's call. */
class CallerGone extends Error {
  readonly status: { code: grpc.status; details: string };

  constructor(status: { code: grpc.status; details: string }) {
    super(status.details);
    this.status = status;
  }
}

/**
 * Why a caller's call ended before its answer: grpc-js reports a deadline that passed as a cancel too. A cancel that
 * comes within DEADLINE_SLACK_MS of the deadline is the deadline (the caller's timer and the server's run apart by
 * the time the call took to arrive).
 */
function endOfCall(deadline: grpc.Deadline): CallerGone {
  const at = deadline instanceof Date ? deadline.getTime() : deadline;
  return new CallerGone(
    Date.now() >= at - DEADLINE_SLACK_MS
      ? { code: grpc.status.DEADLINE_EXCEEDED, details: "Deadline exceeded" }
      : { code: grpc.status.CANCELLED, details: "Cancelled by the caller" },
  );
}

const DEADLINE_SLACK_MS = 100;

/** The status that ended the caller's call, as the error of the runtime call its end cancelled. */
function endedBy(reason: unknown, err: grpc.ServiceError): grpc.ServiceError {
  if (!(reason instanceof CallerGone)) return err;
  const { code, details } = reason.status;
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata: err.metadata });
}

/** The runtime's error as it was (code, details, metadata); anything else becomes INTERNAL with its message. */
function asStatus(err: unknown): Partial<grpc.StatusObject> {
  if (typeof err === "object" && err !== null && typeof (err as grpc.ServiceError).code === "number") {
    const e = err as grpc.ServiceError;
    return { code: e.code, details: e.details, metadata: e.metadata ?? new grpc.Metadata() };
  }
  return { code: grpc.status.INTERNAL, details: err instanceof Error ? err.message : String(err) };
}

function socketPath(listen: string): string {
  if (!listen.startsWith("unix://") || listen.length <= "unix://".length)
    throw new CriError("unsupported-endpoint", `only unix:///path endpoints are served, got ${listen}`);
  return listen.slice("unix://".length);
}

async function removeStaleSocket(path: string): Promise<void> {
  try {
    if ((await lstat(path)).isSocket()) await rm(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
  }
}
