// The benchmarks' result figures and tables, so that every benchmark reports them alike.

/** The nearest-rank percentile of ascending `sorted`; NaN when empty. */
export function percentile(sorted: Float64Array | readonly number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Rows as aligned columns: the first left-aligned, the others right-aligned, two spaces apart. */
export function renderTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows.map((row) => row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")).join("\n");
}
