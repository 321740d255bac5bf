import autocannon from "autocannon";
import { type CpuUse, type GroupCpuUse, startCpuMeter, startGroupCpuMeter } from "./cpu.js";

// Load: autocannon runs with latencies and throughput, and warm-up before measuring.

export interface LoadSpec {
  scenario: string;
  url: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  seconds: number;
}

/** What one load run (or several run side by side) produced; Measurement adds the CPU meter's reading. */
export interface LoadResult {
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
}

export interface Measurement extends LoadResult {
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
  const meter = startCpuMeter(servicePid);
  const result = await measureAcross([spec]);
  return { ...result, cpu: meter.stop() };
}

export interface GroupMeasurement<G extends string> extends LoadResult {
  cpu: GroupCpuUse<G>;
}

/**
 * One scenario with the CPU of named process groups (the service, an upstream, a peer gateway…), and
 * with `threadsOf` that process's threads apart (startGroupCpuMeter). Several specs run side by side
 * and are merged as one scenario (measureAcross): e.g. one per buyer.
 */
export async function measureGroups<G extends string>(
  spec: LoadSpec | readonly LoadSpec[],
  groups: Record<G, readonly number[]>,
  options: { threadsOf?: number } = {},
): Promise<GroupMeasurement<G>> {
  const meter = startGroupCpuMeter(groups, options);
  const result = await measureAcross(Array.isArray(spec) ? spec : [spec as LoadSpec]);
  return { ...result, cpu: meter.stop() };
}

/**
 * Runs several specs at the same time (e.g. one per API process, without a load balancer whose own
 * cost would be measured) and merges them: summed connections and throughput, latencies pooled before
 * the percentiles are taken. `onResponse` sees every answer as it comes (a soak counts them per interval).
 */
export async function measureAcross(
  specs: readonly LoadSpec[],
  onResponse: (status: number, ms: number) => void = () => {},
): Promise<LoadResult> {
  if (specs.length === 0) throw new Error("measureAcross needs at least one spec");
  const latencies: number[] = [];
  const errorSamples = new Set<string>();
  const results = await Promise.all(
    specs.map((spec) =>
      runAutocannon(
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
          onResponse(status, ms);
        },
        (err) => {
          if (errorSamples.size < 5) errorSamples.add(String((err as Error)?.message ?? err));
        },
      ),
    ),
  );
  const sorted = Float64Array.from(latencies).sort();
  const statusCodes: Record<string, number> = {};
  for (const result of results)
    for (const [code, n] of Object.entries(statusCounts(result)))
      statusCodes[code] = (statusCodes[code] ?? 0) + n;
  const other2xx = Object.entries(statusCodes)
    .filter(([code]) => code !== "200" && code.startsWith("2"))
    .reduce((sum, [, n]) => sum + n, 0);
  const sum = (f: (r: autocannon.Result) => number) => results.reduce((total, r) => total + f(r), 0);
  const durationS = Math.max(...results.map((r) => r.duration));
  return {
    scenario: specs[0]!.scenario,
    connections: specs.reduce((total, spec) => total + spec.connections, 0),
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    okPerSecond: latencies.length / durationS,
    ok: latencies.length,
    other2xx,
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    statusCodes,
    errorSamples: [...errorSamples],
    durationS,
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
