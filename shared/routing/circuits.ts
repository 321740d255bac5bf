import { logger } from "../log.js";
import { circuitState } from "./circuit-breaker.js";

/**
 * The router's view of the circuit breaker: which of these listings have an open circuit right now.
 * Half-open ones stay eligible; the worker's allowCall lets exactly one trial through. If Redis cannot
 * answer, no circuit is reported open (ranking goes on; the worker's own checks still apply).
 */
export async function openCircuits(listingIds: string[]): Promise<Set<string>> {
  if (listingIds.length === 0) return new Set();
  try {
    const states = await circuitState(listingIds);
    return new Set([...states].filter(([, state]) => state === "open").map(([id]) => id));
  } catch (err) {
    logger().warn({ err }, "circuit state unavailable; ranking without it");
    return new Set();
  }
}
