// /metrics of `serve --workers`: every process's metrics as one exposition, the primary's own and each worker's,
// aggregated as prom-client aggregates a cluster's (counters and histograms summed; a metric may name another
// aggregator, as the serving certificate's expiry does). prom-client's own cluster support is not used: it
// aggregates the workers' registries only, and the primary holds metrics of its own (the scan, the Leases, the
// policy reloads).
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from "prom-client";

export function everyProcessMetrics(own: Registry, workers: () => Promise<unknown[][]>): () => Promise<string> {
  return async () => {
    const all = [await own.getMetricsAsJSON(), ...(await workers())] as Array<Array<MetricObjectWithValues<MetricValue<string>>>>;
    return AggregatorRegistry.aggregate(all).metrics();
  };
}
