// deploy/monitoring's alerting rules and dashboard read what Imprimatur exports. A real `imprimatur serve` (with
// --metrics-port, a remote backend that does not answer under failurePolicy Ignore, and a policy folder that then
// breaks) is driven until it exports the series the rules watch; the background scan's series, which need a
// cluster, come from the same exporter code (createMetrics, as serve builds it) driven the way the scanner does.
// Then:
//   - every metric a rule or a dashboard query names is exported, and every label a rule selects on is one of its
//     labels;
//   - `promtool check rules` accepts the rule file, and `promtool test rules` fires each alert on series with the
//     recorded names and labels (values made to cross the thresholds over time) and stays quiet below them.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, stringify } from "yaml";
import { createMetrics } from "../../src/server/metrics.ts";
import { podReview } from "../support/admission.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { freePort } from "../support/ports.ts";
import { startConfiguredTestBackend } from "../support/test-imagereview-backend.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const RULES = join(ROOT, "deploy/monitoring/alerts.rules.yaml");
const DASHBOARD = join(ROOT, "deploy/monitoring/dashboard.json");

let dir: string;
let serve: ImprimaturProcess;
let metricsPort: number;
/** Every series serve exported, and those of the scan's exporter: `name{labels}` → value. */
const recorded = new Map<string, number>();
/** Metric families and their types, from the scrapes' # TYPE lines. */
const families = new Map<string, string>();

/** Reads a text exposition into `recorded` and `families`. */
function record(exposition: string): void {
  for (const line of exposition.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) families.set(type[1]!, type[2]!);
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    recorded.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
}

/** The recorded series of `name` whose labels include `labels`, as `{ series, labels }`. */
function seriesOf(name: string, labels: Record<string, string> = {}): Array<{ series: string; labels: Record<string, string>; value: number }> {
  const out = [];
  for (const [series, value] of recorded) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$/.exec(series);
    if (!m || m[1] !== name) continue;
    const own = Object.fromEntries([...(m[2] ?? "").matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (Object.entries(labels).every(([k, v]) => own[k] === v)) out.push({ series, labels: own, value });
  }
  return out;
}

/** A series as promtool's input_series writes it, with the job label a scrape adds. */
function inputSeries(name: string, labels: Record<string, string>, values: string) {
  const all = { ...labels, job: "imprimatur" };
  return {
    series: `${name}{${Object.entries(all)
      .map(([k, v]) => `${k}="${v}"`)
      .join(",")}}`,
    values,
  };
}

async function scrape(): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-monitoring-"));
  const { backend } = await startConfiguredTestBackend(dir, { token: "token", timeout: "1s" });
  await backend.stop(); // a backend that does not answer
  await writeFile(
    join(dir, "config.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ServerConfig",
      failurePolicy: "Ignore",
      backends: [{ name: "scanner", kubeconfig: "scanner.kubeconfig", timeout: "1s" }],
    }),
  );
  await mkdir(join(dir, "policies"));
  const policy = (name: string) =>
    `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: ${name}}\nspec:\n  rules: [{action: deny, images: ["*/forbidden*"]}]\n  default: allow\n`;
  await writeFile(join(dir, "policies", "policy.yaml"), policy("no-forbidden"));
  metricsPort = await freePort();
  serve = await startImprimatur(["--policies", join(dir, "policies"), "--config", join(dir, "config.yaml"), "--metrics-port", String(metricsPort)]);

  // Fail-open admissions (the backend does not answer), a denial, and a policy reload that fails.
  for (const image of ["registry.example.com/app:1", "registry.example.com/forbidden:1"]) {
    const res = await postJson(`${serve.baseUrl}/validate`, serve.ca, podReview({ images: [image] }));
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
  await writeFile(join(dir, "policies", "policy.yaml"), "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: broken}\nspec: {rules: 7}\n");
  const deadline = Date.now() + 15_000;
  while (!/imprimatur_policy_reloads_total\{result="failure"\} [1-9]/.test(await scrape())) {
    assert.ok(Date.now() < deadline, "serve reported the failed reload");
    await new Promise((r) => setTimeout(r, 200));
  }
  record(await scrape());

  // The background scan's series: the exporter serve builds, driven as the scanner and its Lease drive it.
  const scanMetrics = createMetrics();
  scanMetrics.watchLease("imprimatur-scan", () => false);
  scanMetrics.scanReportWriteFailures.inc();
  scanMetrics.signatureVerifications.observe({ outcome: "unavailable" }, 0.2);
  scanMetrics.signatureVerifications.observe({ outcome: "verified" }, 0.05);
  const scanText = await scanMetrics.registry.metrics();
  for (const name of ["leader_election_master_status", "imprimatur_scan_report_write_failures_total", "imprimatur_signature_verifications_seconds"])
    record(
      scanText
        .split("\n")
        .filter((l) => l.startsWith(name) || l.startsWith(`# TYPE ${name} `))
        .join("\n"),
    );
});

after(() => teardown([() => serve?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

/** The metric names an expression reads (histogram series by their family). */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\b(imprimatur_[a-z_]+|leader_election_master_status)\b/g)].map((m) => m[1]!);
}

function familyOf(series: string): string | undefined {
  if (families.has(series)) return series;
  const base = series.replace(/_(bucket|sum|count)$/, "");
  return families.get(base) === "histogram" ? base : undefined;
}

test("every metric the alerting rules and the dashboard read is one serve exports, and every label a rule selects on is its", async () => {
  const rules = (parse(await readFile(RULES, "utf8")) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> }).groups.flatMap((g) => g.rules);
  const dashboard = JSON.parse(await readFile(DASHBOARD, "utf8")) as { panels: Array<{ title: string; targets: Array<{ expr: string }> }> };
  const expressions = [
    ...rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
  ];
  assert.ok(rules.length >= 6 && dashboard.panels.length >= 8);
  const registry = createMetrics().registry;
  const unknown: string[] = [];
  for (const { where, expr } of expressions) {
    for (const name of metricsIn(expr)) if (familyOf(name) === undefined) unknown.push(`${where}: ${name}`);
    // Label matchers: name{label="…", label=~"…"}.
    for (const m of expr.matchAll(/\b([a-z_]+)\{([^}]*)\}/g)) {
      const family = familyOf(m[1]!);
      if (family === undefined) continue;
      const labelNames = (registry.getSingleMetric(family) as unknown as { labelNames?: string[] } | undefined)?.labelNames ?? [];
      for (const l of m[2]!.matchAll(/([a-z_]+)\s*(=~|!=|!~|=)/g))
        if (!labelNames.includes(l[1]!) && l[1] !== "le") unknown.push(`${where}: ${family} has no label ${l[1]}`);
    }
  }
  assert.deepEqual(unknown, []);
});

test("promtool accepts the rule file, and each alert fires on the recorded series past its threshold and not below it", async () => {
  const check = spawnSync("promtool", ["check", "rules", RULES], { encoding: "utf8" });
  assert.equal(check.status, 0, check.stdout + check.stderr);

  const failOpen = seriesOf("imprimatur_decisions_total", { outcome: "fail-open" });
  assert.ok(failOpen.length > 0 && failOpen[0]!.value >= 1, "serve recorded fail-open admissions");
  const validateBuckets = seriesOf("imprimatur_request_duration_seconds_bucket", { endpoint: "validate" });
  assert.ok(validateBuckets.length >= 10, "serve recorded /validate's latency buckets");
  const reloadFailures = seriesOf("imprimatur_policy_reloads_total", { result: "failure" });
  assert.equal(reloadFailures.length, 1, "serve recorded the failed reload");
  const certificate = seriesOf("imprimatur_serving_certificate_expiration_timestamp_seconds");
  assert.equal(certificate.length, 1);
  assert.ok(certificate[0]!.value * 1000 > Date.now() + 30 * 86400_000, "the generated certificate's expiry, months ahead");
  const leader = seriesOf("leader_election_master_status", { name: "imprimatur-scan" });
  const reports = seriesOf("imprimatur_scan_report_write_failures_total");
  const unavailable = seriesOf("imprimatur_signature_verifications_seconds_count", { outcome: "unavailable" });
  const verified = seriesOf("imprimatur_signature_verifications_seconds_count", { outcome: "verified" });
  for (const s of [leader, reports, unavailable, verified]) assert.equal(s.length, 1);

  // /validate's latency: every request slower than 8 s (the buckets up to 5 s stay, the others grow), or fast.
  const latency = (slow: boolean) =>
    validateBuckets.map((b) => inputSeries("imprimatur_request_duration_seconds_bucket", b.labels, slow && Number(b.labels.le) < 10 ? "0x30" : "0+10x30"));
  const alert = (name: string, evalTime: string, expected: Array<{ labels: Record<string, string>; summary: string }>) => ({
    eval_time: evalTime,
    alertname: name,
    exp_alerts: expected.map((e) => ({ exp_labels: { job: "imprimatur", ...e.labels }, exp_annotations: annotationsOf(name, e.summary, e.labels) })),
  });
  const rules = (parse(await readFile(RULES, "utf8")) as { groups: Array<{ rules: Array<{ alert: string; annotations: Record<string, string> }> }> }).groups[0]!
    .rules;
  // The description as Prometheus renders it: only $labels are templated there.
  const annotationsOf = (name: string, summary: string, labels: Record<string, string>) => ({
    description: rules.find((r) => r.alert === name)!.annotations.description!.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_, l: string) => labels[l] ?? ""),
    summary,
  });
  const endpoint = failOpen[0]!.labels.endpoint!;
  const tests = {
    rule_files: [RULES],
    evaluation_interval: "1m",
    tests: [
      {
        interval: "1m",
        input_series: [
          ...latency(true),
          inputSeries("imprimatur_decisions_total", failOpen[0]!.labels, `${failOpen[0]!.value}+1x30`),
          inputSeries("imprimatur_policy_reloads_total", reloadFailures[0]!.labels, `${reloadFailures[0]!.value}+1x30`),
          inputSeries("imprimatur_serving_certificate_expiration_timestamp_seconds", {}, `${3 * 86400}x150`),
          inputSeries("leader_election_master_status", leader[0]!.labels, "0x30"),
          inputSeries("imprimatur_scan_report_write_failures_total", {}, "0+1x30"),
          inputSeries("imprimatur_signature_verifications_seconds_count", unavailable[0]!.labels, "0+5x30"),
          inputSeries("imprimatur_signature_verifications_seconds_count", verified[0]!.labels, "0+5x30"),
        ],
        alert_rule_test: [
          alert("ImprimaturWebhookLatencyHigh", "10m", [
            { labels: { severity: "warning", endpoint: "validate" }, summary: "Imprimatur's validate answers slowly: p99 9.95s" },
          ]),
          alert("ImprimaturFailOpenAdmissions", "15m", [
            { labels: { severity: "warning", endpoint }, summary: `Imprimatur admitted 10 requests unjudged on ${endpoint} (fail-open)` },
          ]),
          alert("ImprimaturPolicyReloadsFailing", "20m", [{ labels: { severity: "warning" }, summary: "Imprimatur refused 15 policy reloads" }]),
          alert("ImprimaturServingCertificateExpiresSoon", "2h", [
            { labels: { severity: "critical" }, summary: "Imprimatur's serving certificate expires in 2d 22h 0m 0s" },
          ]),
          alert("ImprimaturNoScanLeader", "10m", [{ labels: { severity: "warning" }, summary: "No Imprimatur replica holds the background scan's Lease" }]),
          alert("ImprimaturPolicyReportsNotWritten", "30m", [
            { labels: { severity: "warning" }, summary: "Imprimatur could not write 15 policy reports in 15 minutes" },
          ]),
          alert("ImprimaturSignatureVerificationsUnavailable", "20m", [
            { labels: { severity: "warning" }, summary: "50% of Imprimatur's signature verifications could not be done" },
          ]),
        ],
      },
      {
        // Below every threshold: fast answers, no fail-open, no failed reload or report write, a certificate
        // months away (the recorded one), a replica that holds the Lease, verifications that succeed.
        interval: "1m",
        input_series: [
          ...latency(false),
          inputSeries("imprimatur_decisions_total", failOpen[0]!.labels, `${failOpen[0]!.value}x30`),
          inputSeries("imprimatur_policy_reloads_total", reloadFailures[0]!.labels, `${reloadFailures[0]!.value}x30`),
          inputSeries("imprimatur_serving_certificate_expiration_timestamp_seconds", {}, `${certificate[0]!.value}x40`),
          inputSeries("leader_election_master_status", leader[0]!.labels, "1x30"),
          inputSeries("imprimatur_scan_report_write_failures_total", {}, "3x30"),
          inputSeries("imprimatur_signature_verifications_seconds_count", unavailable[0]!.labels, "0x30"),
          inputSeries("imprimatur_signature_verifications_seconds_count", verified[0]!.labels, "0+5x30"),
        ],
        alert_rule_test: rules.map((r) => alert(r.alert, "30m", [])),
      },
    ],
  };
  const file = join(dir, "alerts.test.yaml");
  await writeFile(file, stringify(tests));
  const tested = spawnSync("promtool", ["test", "rules", file], { encoding: "utf8" });
  assert.equal(tested.status, 0, tested.stdout + tested.stderr);
});
