// docs/metrics.md lists every metric with its type and labels; this reads the metrics the code registers (the
// registries `serve` and `node-proxy` export) and compares them with the page's tables, section by section.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import type { Registry } from "prom-client";
import { createMetrics } from "../../src/server/metrics.ts";
import { createNodeMetrics } from "../../src/node/node-metrics.ts";

const PAGE = new URL("../../docs/metrics.md", import.meta.url);

interface MetricRow {
  name: string;
  type: string;
  labels: string[];
}

/** The metrics of a registry, by name, with their type and label names. */
function registered(registry: Registry): MetricRow[] {
  return registry
    .getMetricsAsArray()
    .map((m) => {
      const metric = m as unknown as { name: string; type: string; labelNames?: string[] };
      return { name: metric.name, type: metric.type, labels: [...(metric.labelNames ?? [])].sort() };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** The table rows of the page's section headed `heading`: | `name` | type | `label`, … (or —) | meaning |. */
function documented(page: string, heading: string): MetricRow[] {
  const section = page.split(/^## /m).find((s) => s.startsWith(`${heading}\n`));
  assert.ok(section, `docs/metrics.md has a section "## ${heading}"`);
  const rows: MetricRow[] = [];
  for (const line of section.split("\n")) {
    const cells = /^\|(.*)\|$/
      .exec(line.trim())?.[1]
      ?.split("|")
      .map((c) => c.trim());
    const name = cells && /^`([a-z_]+)`$/.exec(cells[0]!)?.[1];
    if (!cells || !name) continue;
    const labels = cells[2] === "—" ? [] : cells[2]!.split(",").map((l) => /^`([a-z_]+)`$/.exec(l.trim())?.[1] ?? `(unreadable label cell: ${cells[2]})`);
    rows.push({ name, type: cells[1]!, labels: labels.sort() });
  }
  return rows.sort((a, b) => a.name.localeCompare(b.name));
}

test("docs/metrics.md lists every metric of serve with its type and labels, and only those", async () => {
  const page = await readFile(PAGE, "utf8");
  const all = registered(createMetrics().registry);
  // Imprimatur's own, and client-go's leader_election_master_status, exported under client-go's name.
  const own = all.filter((m) => m.name.startsWith("imprimatur_") || m.name === "leader_election_master_status");
  assert.ok(own.length >= 10);
  assert.deepEqual(documented(page, "`imprimatur serve`"), own);
  // The rest are the client library's process metrics, which the page names by family and a few examples.
  const others = all.filter((m) => !own.includes(m));
  assert.deepEqual(
    others.filter((m) => !/^(process|nodejs)_/.test(m.name)),
    [],
    "no other metric",
  );
  for (const [, name] of page.matchAll(/`((?:process|nodejs)_[a-z_]+)`/g)) {
    assert.ok(
      others.some((m) => m.name === name),
      `${name}, named on the page, is exported`,
    );
  }
});

test("docs/metrics.md lists every metric of node-proxy with its type and labels, and only those", async () => {
  const page = await readFile(PAGE, "utf8");
  const all = registered(createNodeMetrics(() => undefined).registry);
  assert.ok(all.length >= 6);
  assert.deepEqual(documented(page, "`imprimatur node-proxy`"), all);
});
