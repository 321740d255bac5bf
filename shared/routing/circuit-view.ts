import { getConfig } from "../config.js";
import type { CircuitState } from "./circuit-breaker.js";

// This process's view of circuit states, for ranking an execute on kept listings (docs/architecture.md
// "Caches that are proved"): what it last read from Redis, or was told by its own call gates and probes,
// for at most RANKING_STATS_TTL_MS. Nobody tells it of other processes' transitions, and nothing needs
// to: the call gate checks the circuit in Redis, atomically, before every call, so a listing this view
// still shows closed is refused there and the run falls back (the refusal recorded as a skipped attempt,
// and the gate's answer taken into the view); and an execute the view refuses outright (every listing's
// circuit open) is decided again on a fresh read before it is answered (submitExecution).

interface Seen {
  open: boolean;
  at: number;
}

/** Bounded: a deployment with more listings in play than this reads their circuits more often. */
const MAX_SEEN = 10_000;
const seen = new Map<string, Seen>();

/** Records a listing's circuit state as just read or reported by a gate or probe of this process. */
export function circuitSeen(listingId: string, state: CircuitState, at = Date.now()): void {
  if (seen.size >= MAX_SEEN && !seen.has(listingId)) seen.clear();
  seen.set(listingId, { open: state === "open", at });
}

/**
 * The open circuits among ids as this process saw them within RANKING_STATS_TTL_MS; undefined when any
 * of them was not seen that lately (the caller reads them all).
 */
export function seenOpenCircuits(ids: readonly string[], now = Date.now()): Set<string> | undefined {
  const ttl = getConfig().rankingStatsTtlMs;
  const open = new Set<string>();
  for (const id of ids) {
    const entry = seen.get(id);
    if (!entry || now - entry.at >= ttl) return undefined;
    if (entry.open) open.add(id);
  }
  return open;
}
