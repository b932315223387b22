// A node image proxy in this process (src/node/node-image-proxy.ts), as unit tests build one: over a RecordStore and
// a runtime client (a fake's, see test/unit/node/fake-image-service.ts), with the default verification policy, no
// allowlist, metrics of its own and a silent logger unless the test gives others.
import pino from "pino";
import { createNodeMetrics } from "../../src/node/node-metrics.ts";
import { NodeImageProxy, type NodeImageProxyOptions } from "../../src/node/node-image-proxy.ts";

export function inProcessNodeProxy(opts: Pick<NodeImageProxyOptions, "store" | "runtime"> & Partial<NodeImageProxyOptions>): NodeImageProxy {
  return new NodeImageProxy({
    policy: "NeverVerifyPreloadedImages",
    allowlist: [],
    logger: pino({ level: "silent" }),
    metrics: createNodeMetrics(() => opts.store),
    ...opts,
  });
}
