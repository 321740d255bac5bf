/**
 * Latency percentiles from a fixed log2 histogram. Percentiles over 30 days cannot be summed from
 * daily parts exactly, so folded attempts keep per-day bucket counts instead of their latencies:
 * bucket 0 holds latencies ≤ 0 ms, bucket b ≥ 1 holds [2^((b-1)/8), 2^(b/8)) ms (8 per doubling),
 * the last bucket everything from 2^20 ms (17 min) up. A bucket stands for its geometric midpoint, so
 * each order statistic is within a factor 2^(1/16) (±4.5 %) of the true one below 2^20 ms, and so is a
 * percentile interpolated between two of them the way percentile_cont does.
 */

export const BUCKETS_PER_DOUBLING = 8;
export const LAST_BUCKET = 20 * BUCKETS_PER_DOUBLING + 1;

/**
 * The smallest integer latency of each bucket b = 1..LAST_BUCKET-1 above bucket 1, exactly: the least
 * n with n^8 ≥ 2^b (integer arithmetic, no rounding), i.e. ⌈2^(b/8)⌉.
 */
const BUCKET_FLOORS: readonly bigint[] = Array.from({ length: LAST_BUCKET - 1 }, (_, i) => {
  const target = 2n ** BigInt(i + 1);
  let n = BigInt(Math.floor(2 ** ((i + 1) / BUCKETS_PER_DOUBLING))) || 1n;
  while (n ** 8n < target) n++;
  while (n > 1n && (n - 1n) ** 8n >= target) n--;
  return n;
});

/**
 * The SQL expression of an integer latency's bucket (keep in step with bucketValue): floor(log2(ms) ×
 * 8) + 1, capped at LAST_BUCKET, computed as how many bucket floors the latency reaches. Same answer as
 * the logarithm for every integer, and about 50× cheaper than a numeric log per row (the live part of
 * a stats read computes it for up to a day of a listing's attempts).
 */
export function bucketSql(latencyColumn: string): string {
  return `case when ${latencyColumn} <= 0 then 0
               else width_bucket(${latencyColumn}::bigint, '{${BUCKET_FLOORS.join(",")}}'::bigint[]) + 1 end`;
}

/** The latency a bucket stands for: 0 for bucket 0, otherwise its geometric midpoint. */
export function bucketValue(bucket: number): number {
  return bucket <= 0 ? 0 : 2 ** ((bucket - 0.5) / BUCKETS_PER_DOUBLING);
}

/** The p-quantile (0..1) of the latencies counted in `counts` (bucket → count), percentile_cont style. */
export function histogramPercentile(counts: Map<number, number>, p: number): number | null {
  const buckets = [...counts.entries()].filter(([, n]) => n > 0).sort(([a], [b]) => a - b);
  const total = buckets.reduce((sum, [, n]) => sum + n, 0);
  if (total === 0) return null;
  const rank = p * (total - 1);
  const at = (k: number): number => {
    let seen = 0;
    for (const [bucket, n] of buckets) {
      seen += n;
      if (k < seen) return bucketValue(bucket);
    }
    return bucketValue(buckets[buckets.length - 1]![0]);
  };
  const lo = Math.floor(rank);
  const low = at(lo);
  return low + (rank - lo) * (at(Math.ceil(rank)) - low);
}
