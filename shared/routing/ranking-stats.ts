import { type RecentCallStats, readRecentCallStats } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { setRecent } from "../kernel/recent.js";

/** Ranking looks at each listing's most recent calls: recent behaviour, at a bounded cost per execute. */
export const RECENT_CALLS = 100;

/** Past this many listings the least recently read entries are dropped (a bounded cache). */
const MAX_ENTRIES = 10_000;

interface Entry {
  at: number;
  stats: Promise<RecentCallStats>;
  /** A refresh of this expired entry is running: it stays the answer until the refresh lands. */
  refreshing?: boolean;
}

const cache = new Map<string, Entry>();

function remember(id: string, entry: Entry): void {
  setRecent(cache, id, entry, MAX_ENTRIES);
}

const NO_CALLS: RecentCallStats = { calls: 0, succeeded: 0, p50_latency_ms: null };

/**
 * Each listing's recent-call statistics for ranking, read at most once per RANKING_STATS_TTL_MS per
 * process. They summarise the last RECENT_CALLS calls, so a second's staleness moves a score by at most
 * what a second of calls does; what must act at once — an open circuit, a retired or repriced listing,
 * the key's policy — is read live on every execute. Concurrent executes that miss share one read, so an
 * expiry under load costs one query, not one per waiting request. An expired entry is answered as it
 * stands while its refresh runs (no execute waits for a refresh; only a listing never read waits for
 * its first read). A failed read is not cached.
 */
export async function recentCallStats(ids: string[]): Promise<Map<string, RecentCallStats>> {
  const ttl = getConfig().rankingStatsTtlMs;
  if (ttl === 0) return readRecentCallStats(db(), ids, RECENT_CALLS);
  const now = performance.now();
  const missing = ids.filter((id) => {
    const hit = cache.get(id);
    return !hit || (now - hit.at >= ttl && !hit.refreshing);
  });
  if (missing.length > 0) {
    const read = readRecentCallStats(db(), missing, RECENT_CALLS);
    for (const id of missing) {
      const stats = read.then((found) => found.get(id) ?? NO_CALLS);
      const stale = cache.get(id);
      if (stale) {
        // Answered from the stale entry meanwhile; the fresh one replaces it once read.
        stale.refreshing = true;
        stats.then(
          () => remember(id, { at: performance.now(), stats }),
          () => {
            stale.refreshing = false;
          },
        );
        continue;
      }
      // Dropped on failure, so the next execute reads again instead of meeting the same error.
      stats.catch(() => {
        if (cache.get(id)?.stats === stats) cache.delete(id);
      });
      remember(id, { at: now, stats });
    }
  }
  const pending = ids.map((id) => cache.get(id)!.stats);
  const stats = await Promise.all(pending);
  return new Map(ids.map((id, i) => [id, stats[i]!]));
}

/** Forgets every cached entry (tests, and a process that must see the database's state at once). */
export function forgetRankingStats(): void {
  cache.clear();
}
