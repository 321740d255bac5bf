import autocannon from "autocannon";
import { type CpuUse, startCpuMeter } from "./cpu.js";

// Load: autocannon runs with latencies and throughput, and warm-up before measuring.

export interface LoadSpec {
  scenario: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  seconds: number;
}

export interface Measurement {
  scenario: string;
  connections: number;
  p50Ms: number;
  p99Ms: number;
  okPerSecond: number;
  ok: number;
  /** 2xx answers that are not the 200 result, e.g. 202 "still running" from /api/execute. */
  other2xx: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  errorSamples: string[];
  durationS: number;
  cpu: CpuUse;
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

export function statusCounts(result: autocannon.Result): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) counts[code] = stat.count ?? 0;
  return counts;
}

export function runAutocannon(
  options: autocannon.Options,
  onResponse: (status: number, ms: number) => void,
  onError: (err: unknown) => void,
): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const instance = autocannon(options, (err, result) => (err ? reject(err) : resolve(result)));
    instance.on("response", (_client, status, _bytes, ms) => onResponse(status, ms));
    instance.on("reqError", onError);
  });
}

/**
 * Drives one scenario. Latencies are collected from autocannon's per-response event rather than its
 * histogram, whose whole-millisecond buckets are too coarse for sub-millisecond echo calls. Only 200
 * answers count towards latency and throughput: a fast error must not look like a fast success.
 */
export async function measure(spec: LoadSpec, servicePid: number): Promise<Measurement> {
  const latencies: number[] = [];
  const errorSamples = new Set<string>();
  const meter = startCpuMeter(servicePid);
  const result = await runAutocannon(
    {
      url: spec.url,
      method: "POST",
      headers: spec.headers,
      body: spec.body,
      connections: spec.connections,
      duration: spec.seconds,
    },
    (status, ms) => {
      if (status === 200) latencies.push(ms);
    },
    (err) => {
      if (errorSamples.size < 5) errorSamples.add(String((err as Error)?.message ?? err));
    },
  );
  const cpu = meter.stop();
  const sorted = Float64Array.from(latencies).sort();
  const statusCodes = statusCounts(result);
  const other2xx = Object.entries(statusCodes)
    .filter(([code]) => code !== "200" && code.startsWith("2"))
    .reduce((sum, [, n]) => sum + n, 0);
  return {
    scenario: spec.scenario,
    connections: spec.connections,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    okPerSecond: latencies.length / result.duration,
    ok: latencies.length,
    other2xx,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    errorSamples: [...errorSamples],
    durationS: result.duration,
    cpu,
  };
}

/** A fixed number of requests to warm connections, JIT, caches and the database pool. */
export async function warmUp(spec: Omit<LoadSpec, "seconds">, amount: number): Promise<void> {
  await runAutocannon(
    {
      url: spec.url,
      method: "POST",
      headers: spec.headers,
      body: spec.body,
      connections: spec.connections,
      amount,
    },
    () => {},
    () => {},
  );
}
