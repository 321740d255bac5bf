import type { ProbeCheck, Verdict } from "../store/orders.js";

export interface ProbeResult {
  verdict: Verdict;
  checks: ProbeCheck[];
}

/** What a probe knows about its order: the target, and what the listing declared (read only). */
export interface ProbeTarget {
  orderId: string;
  url: string;
  /** The listing's output_schema when the order named a listing that declares one. */
  outputSchema: { listingId: string; schema: Record<string, unknown> } | null;
}

/** A response header as one string (undici gives arrays for repeated headers). */
export function headerValue(
  headers: Record<string, string | string[] | undefined>,
  name: string,
): string | null {
  const value = headers[name.toLowerCase()];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(", ") : value;
}
