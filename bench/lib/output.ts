import os from "node:os";
import type { Infra } from "./infra.js";

// Output: plain-text tables and fixed-point numbers.

export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

export const fixed = (n: number, digits = 2) => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

export function log(message = ""): void {
  process.stdout.write(`${message}\n`);
}

/** A line that must not be missed in the output (errors, neighbours, missed preconditions). */
export function loud(message: string): void {
  log(`!!!!! ${message}`);
}

/** What the run is on, printed first so that figures can be compared across machines. */
export function printMachine(infra: Infra, notes: readonly string[] = []): void {
  const cpus = os.cpus();
  log("Machine");
  log(`  cpus: ${cpus.length} × ${cpus[0]?.model.trim() ?? "unknown"}`);
  log(`  memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}`);
  log(`  node: ${process.version}`);
  log(`  postgres: ${infra.postgres}`);
  log(`  redis: ${infra.redis}`);
  log(
    `  EXECUTIONS_CONCURRENCY=${process.env.EXECUTIONS_CONCURRENCY ?? "default"}, ` +
      `DATABASE_POOL_MAX=${process.env.DATABASE_POOL_MAX ?? "default"}`,
  );
  for (const note of notes) log(`  ${note}`);
  log();
}

/** Counts lines a child printed, the same text once with its count (the pid prefix of Node's warnings dropped). */
export class LineTally {
  private readonly counts = new Map<string, number>();
  total = 0;

  add(line: string): void {
    const text = line.replace(/^\(node:\d+\) /, "").slice(0, 400);
    this.counts.set(text, (this.counts.get(text) ?? 0) + 1);
    this.total += 1;
  }

  /** How many lines matched (case-insensitive substring). */
  matching(needle: string): number {
    const lower = needle.toLowerCase();
    let n = 0;
    for (const [text, count] of this.counts) if (text.toLowerCase().includes(lower)) n += count;
    return n;
  }

  /** The most frequent distinct lines, most frequent first. */
  top(limit = 10): [string, number][] {
    return [...this.counts].sort((a, b) => b[1] - a[1]).slice(0, limit);
  }
}

/**
 * The children log at warn, so anything they printed during the runs deserves to be seen. Repeated
 * lines are counted rather than printed again.
 */
export function reportOutput(who: string, tally: LineTally): void {
  if (tally.total === 0) return;
  log();
  loud(`${who} logged ${tally.total} warning/error line(s) during the runs (distinct, most frequent first):`);
  for (const [text, n] of tally.top()) log(`  ${n}× ${text}`);
}
