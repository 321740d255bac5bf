// Settings of the catalog benchmark (environment knobs and targets) and its console output.

export const DATABASE = "agentmarket_bench_catalog";
export const LISTINGS = Number(process.env.BENCH_LISTINGS ?? 100_000);
export const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
export const KEEP_DATA = process.env.BENCH_KEEP_DATA === "1";
export const SELLERS = 1000;
export const POOL_MAX = 8;
export const CONCURRENCY = [1, 8] as const;
export const TARGET_P50_MS = 5;
export const TARGET_P99_MS = 20;
export const TARGET_LISTINGS = 100_000;
/** Bump when the generated data changes, so BENCH_KEEP_DATA does not reuse a stale seed. */
export const SEED_VERSION = 1;
export const INSERT_BATCH = 5000;

export function log(message = ""): void {
  process.stdout.write(`${message}\n`);
}

export function loud(message: string): void {
  log(`!!!!! ${message}`);
}
