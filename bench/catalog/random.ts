// Deterministic randomness: the same seed gives the same catalog and the same query lists.

// Deterministic randomness

/** mulberry32: small, fast, seeded; the same seed gives the same catalog and the same query lists. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Rand = () => number;

export const pick = <T>(rand: Rand, items: readonly T[]): T => items[Math.floor(rand() * items.length)]!;
export const between = (rand: Rand, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

/** Zipf-like choice: the first items are common, the tail rare, as words and sellers are in a catalog. */
export function zipf<T>(items: readonly T[], exponent: number): (rand: Rand) => T {
  const cumulative: number[] = [];
  let sum = 0;
  for (let i = 0; i < items.length; i++) {
    sum += 1 / (i + 1) ** exponent;
    cumulative.push(sum);
  }
  return (rand) => {
    const x = rand() * sum;
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return items[lo]!;
  };
}

export function shuffled<T>(rand: Rand, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
