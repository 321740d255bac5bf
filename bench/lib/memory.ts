import { readFileSync } from "node:fs";

// Memory of a child process: its resident set from /proc (Linux), and the V8 heap it reports itself.

const MB = 2 ** 20;

/** The process's resident set in MB (VmRSS of /proc/<pid>/status); NaN where /proc is not available. */
export function readRssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb === undefined ? Number.NaN : (Number(kb) * 1024) / MB;
  } catch {
    return Number.NaN;
  }
}

/**
 * The V8 heap in use, in MB, from the service's Prometheus text (prom-client's default
 * `nodejs_heap_size_used_bytes`, under the service's metric prefix); NaN when it cannot be read.
 * Sends METRICS_TOKEN as the bearer token when one is set (the child inherits it).
 */
export async function readHeapUsedMb(metricsUrl: string, token = process.env.METRICS_TOKEN): Promise<number> {
  try {
    const res = await fetch(metricsUrl, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(5000),
    });
    if (res.status !== 200) return Number.NaN;
    const bytes = /^\w*nodejs_heap_size_used_bytes(?:\{[^}]*\})?\s+([\d.e+]+)/m.exec(await res.text())?.[1];
    return bytes === undefined ? Number.NaN : Number(bytes) / MB;
  } catch {
    return Number.NaN;
  }
}
