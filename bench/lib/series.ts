// Small statistics over a series: means, medians, a least-squares slope, and a one-line sparkline.

export function mean(values: readonly number[]): number {
  return values.length === 0 ? Number.NaN : values.reduce((sum, v) => sum + v, 0) / values.length;
}

/** The middle value, or the mean of the two middle ones; NaN for no values. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The least-squares slope of ys over xs (units of y per unit of x); NaN with fewer than two points. */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  if (xs.length < 2 || xs.length !== ys.length) return Number.NaN;
  const mx = mean(xs);
  const my = mean(ys);
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i += 1) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}

const BARS = "▁▂▃▄▅▆▇█";

/** One character per value, scaled between the series' own minimum and maximum. */
export function sparkline(values: readonly number[]): string {
  const finite = values.filter(Number.isFinite);
  if (finite.length === 0) return "";
  const lo = Math.min(...finite);
  const hi = Math.max(...finite);
  return values
    .map((v) => {
      if (!Number.isFinite(v)) return " ";
      const level = hi === lo ? 0 : Math.round(((v - lo) / (hi - lo)) * (BARS.length - 1));
      return BARS[level]!;
    })
    .join("");
}
