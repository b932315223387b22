// A server's Prometheus /metrics: fetched over TLS, parsed into samples, and summed by name and labels.
import { Agent } from "undici";

/** The text of `origin`/metrics, trusting the CA PEM `ca`. */
export async function fetchMetrics(origin: string, ca: string): Promise<string> {
  const agent = new Agent({ connect: { ca }, headersTimeout: 5_000, bodyTimeout: 5_000 });
  try {
    const res = await agent.request({ origin, path: "/metrics", method: "GET" });
    return await res.body.text();
  } finally {
    await agent.close();
  }
}

/** Sample values keyed by name plus label set as written, e.g. `name{a="1",b="2"}`. */
export type Samples = Map<string, number>;

export function parseMetrics(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)/.exec(line);
    if (m) out.set(m[1]! + (m[2] ?? ""), Number(m[3]));
  }
  return out;
}

/** Sum of the samples of `name` whose labels contain every `label="value"` given; 0 when there are none. */
export function sumOf(samples: Samples, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let total = 0;
  for (const [key, value] of samples) {
    const brace = key.indexOf("{");
    if ((brace < 0 ? key : key.slice(0, brace)) !== name) continue;
    const labelText = brace < 0 ? "" : key.slice(brace);
    if (wanted.every((w) => labelText.includes(`{${w}`) || labelText.includes(`,${w}`))) total += value;
  }
  return total;
}
