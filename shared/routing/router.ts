import {
  findActiveByTaskAlias,
  findActiveByTaskAliasAt,
  type ListingRow,
  type RecentCallStats,
  taskAlias,
} from "../catalog/index.js";
import { db } from "../db/knex.js";
import { type KeyPolicy, type ScopeExclusion, scopeExclusion } from "../identity/index.js";
import { formatUsdc, micros } from "../kernel/money.js";
import { setRecent } from "../kernel/recent.js";
import type { PaidGate } from "../money/index.js";
import { availableToolIds } from "../tools/index.js";
import { keptOpenCircuits, openCircuits } from "./circuits.js";
import { recentCallStats } from "./ranking-stats.js";

/**
 * Ranking (docs/routing.md "Routing"): score = 0.40 reliability + 0.25 verification + 0.20 latency + 0.15 price,
 * each component in 0..1.
 * - reliability: (successful calls + 1) / (calls + 2) over the last RECENT_CALLS calls within 30 days (ranking-stats.ts)
 *   (Laplace: no data → 0.5);
 * - verification: verified 1, reachable 0.7, never checked 0.4;
 * - latency: 1 / (1 + p50 seconds) (no data → 0.5);
 * - price: 1 / (1 + price in USDC).
 * Ties break by price, then age, so the order is deterministic.
 */
export const WEIGHTS = { reliability: 0.4, verification: 0.25, latency: 0.2, price: 0.15 } as const;

const VERIFICATION_SCORE: Record<string, number> = { verified: 1, reachable: 0.7 };

export interface ScoreComponents {
  reliability: number;
  verification: number;
  latency: number;
  price: number;
}

export interface Candidate {
  listing: ListingRow;
  stats: RecentCallStats;
  score: number;
  components: ScoreComponents;
}

export type ExclusionReason =
  | ScopeExclusion
  | "own_listing"
  | "over_max_cost"
  | "not_approved"
  | "verification_failed"
  | "paid_execution_unavailable"
  | "circuit_open";

export interface Ranking {
  eligible: Candidate[];
  excluded: { listing: ListingRow; reason: ExclusionReason }[];
  /** The gate as read for this ranking; null when no paid listing answered, so it was not read. */
  gate: PaidGate | null;
}

/** The gate, or how to read it: read only when a paid listing answers (free work skips the reads). */
export type GateSource = PaidGate | (() => Promise<PaidGate>);

const round = (n: number) => Math.round(n * 1000) / 1000;

/** The score of one listing and the components that make it. */
export function scoreListing(
  listing: ListingRow,
  stats: RecentCallStats,
): { score: number; components: ScoreComponents } {
  const components: ScoreComponents = {
    reliability: round((stats.succeeded + 1) / (stats.calls + 2)),
    verification: VERIFICATION_SCORE[listing.verification_status ?? ""] ?? 0.4,
    latency: stats.p50_latency_ms === null ? 0.5 : round(1 / (1 + stats.p50_latency_ms / 1000)),
    price: round(1 / (1 + Number(micros(listing.price_micros)) / 1_000_000)),
  };
  const score = round(
    (Object.keys(WEIGHTS) as (keyof ScoreComponents)[]).reduce(
      (sum, k) => sum + WEIGHTS[k] * components[k],
      0,
    ),
  );
  return { score, components };
}

/** What a ranking excludes by: the caller's cap, the gate, open circuits, the key's scopes, the buyer. */
interface ExclusionRules {
  maxCostMicros: bigint | null;
  gate: PaidGate;
  openCircuits: Set<string>;
  policy?: KeyPolicy;
  buyerAgentId?: string;
}

function exclusion(listing: ListingRow, rules: ExclusionRules): ExclusionReason | null {
  if (rules.buyerAgentId !== undefined && listing.seller_id === rules.buyerAgentId) return "own_listing";
  if (listing.review_status !== "approved") return "not_approved";
  if (listing.verification_status === "failed") return "verification_failed";
  const scope = rules.policy ? scopeExclusion(rules.policy, listing) : null;
  if (scope) return scope;
  const price = micros(listing.price_micros);
  if (rules.maxCostMicros !== null && price > rules.maxCostMicros) return "over_max_cost";
  if (price > 0n && !rules.gate.enabled) return "paid_execution_unavailable";
  if (rules.openCircuits.has(listing.id)) return "circuit_open";
  return null;
}

/** A task's listings being read ahead of ranking, with the circuit states read beside them. */
export interface TaskRead {
  listings: Promise<ListingRow[]>;
  /**
   * Set when the listings are this process's copy rather than a read: the catalog generation they were
   * read at. The insert that creates the invocation writes nothing unless the catalog is still at it
   * (CatalogMoved), so a copy acts only while it is exactly what the database holds.
   */
  generation?: string;
  /** Open circuits among the ids the task's listings had at their last read in this process. */
  circuits?: { ids: ReadonlySet<string>; open: Promise<Set<string>> };
}

/** A task's listings as last read in this process, and the catalog generation of that read. */
interface Remembered {
  rows: ListingRow[];
  ids: string[];
  idSet: ReadonlySet<string>;
  generation: bigint | null;
}

/** Tasks whose listings were read lately (bounded: the oldest goes first). */
const MAX_TASKS_REMEMBERED = 1000;
const remembered = new Map<string, Remembered>();

/**
 * The active listings answering to a task, as ranking reads them: it does not depend on the caller, so
 * POST /api/execute starts it while the key is looked up (RouteDef.prefetch) and hands it to
 * rankCandidates. A task read before answers from the copy of that read, with its catalog generation
 * (TaskRead.generation): a retired or repriced listing still binds at once, since the creating insert
 * proves the generation and a moved catalog sends the execute back here for a fresh read (docs/architecture.md
 * "Caches that are proved"). The circuits of the listings the task had last time are read at the same
 * time (Redis beside PostgreSQL, not after it); ranking reads those of any listing that has joined
 * since (circuitsOf).
 */
export function readTaskListings(task: string, options: { fresh?: boolean } = {}): TaskRead {
  // Under the form the alias matches in ("Echo" is "echo"), and the tools this process can sell now.
  const key = `${taskAlias(task)}\u0000${availableToolIds().join(",")}`;
  const kept = remembered.get(key);
  if (kept?.generation != null && !options.fresh) {
    return {
      listings: Promise.resolve(kept.rows),
      generation: kept.generation.toString(),
      circuits: { ids: kept.idSet, open: keptOpenCircuits(kept.ids) },
    };
  }
  const read = findActiveByTaskAliasAt(db(), task);
  read.then(
    ({ rows, generation }) => remember(key, rows, generation),
    () => {},
  );
  const listings = read.then((r) => r.rows);
  // Started ahead of the request's checks (a route's prefetch), so a refused request abandons it: its
  // failure must not go unhandled (Node ends the process), while a reader that awaits still meets it.
  listings.catch(() => {});
  if (!kept?.ids.length) return { listings };
  return { listings, circuits: { ids: kept.idSet, open: openCircuits(kept.ids) } };
}

/** Keeps a read unless a read of a later generation is kept already (reads may end out of order). */
function remember(key: string, rows: ListingRow[], generationText: string | null): void {
  const generation = generationText === null ? null : BigInt(generationText);
  const kept = remembered.get(key);
  if (kept?.generation != null && generation !== null && kept.generation > generation) return;
  const ids = rows.map((l) => l.id);
  setRecent(remembered, key, { rows, ids, idSet: new Set(ids), generation }, MAX_TASKS_REMEMBERED);
}

/** The open circuits among ids: those read ahead where they cover an id, the rest read now. */
async function circuitsOf(
  ids: string[],
  ahead: TaskRead["circuits"],
  readOpenCircuits: (ids: string[]) => Promise<Set<string>>,
): Promise<Set<string>> {
  if (!ahead) return readOpenCircuits(ids);
  const missing = ids.filter((id) => !ahead.ids.has(id));
  if (missing.length === 0) return ahead.open;
  const [open, more] = await Promise.all([ahead.open, readOpenCircuits(missing)]);
  return new Set([...open, ...more]);
}

/**
 * Ranks the active listings answering to a task: eligible ones by score (then price, then age), the
 * rest with the reason they were left out. Eligible: approved, not failed, within max_cost, payable
 * under the gate, circuit not open. The sandbox ranks only tumbler_enabled listings (tumblerOnly). With
 * the calling key's policy, listings outside its scopes are excluded with the scope's reason, before
 * any charge (docs/payments.md "Keys, scopes and spend limits"). With the buyer's agent id, its own listings are
 * excluded as own_listing (docs/routing.md "Self-dealing").
 */
export async function rankCandidates(
  task: string,
  maxCostMicros: bigint | null,
  gateSource: GateSource,
  openCircuits: (ids: string[]) => Promise<Set<string>>,
  options: {
    tumblerOnly?: boolean;
    policy?: KeyPolicy;
    buyerAgentId?: string;
    /** The task's listings, already being read (readTaskListings, started by the route's prefetch). */
    read?: TaskRead;
  } = {},
): Promise<Ranking> {
  const listings = await (options.read?.listings ?? findActiveByTaskAlias(db(), task, options));
  const ids = listings.map((l) => l.id);
  const anyPaid = listings.some((l) => micros(l.price_micros) > 0n);
  const [stats, open, gate] = await Promise.all([
    recentCallStats(ids),
    circuitsOf(ids, options.read?.circuits, openCircuits),
    typeof gateSource === "function" ? (anyPaid ? gateSource() : null) : gateSource,
  ]);
  // With no paid listing the gate excludes nothing; a closed stand-in keeps that true.
  const effective = gate ?? { enabled: false, reason: null };
  const ranking: Ranking = { eligible: [], excluded: [], gate };
  for (const listing of listings) {
    const reason = exclusion(listing, {
      maxCostMicros,
      gate: effective,
      openCircuits: open,
      policy: options.policy,
      buyerAgentId: options.buyerAgentId,
    });
    if (reason) ranking.excluded.push({ listing, reason });
    else
      ranking.eligible.push({
        listing,
        stats: stats.get(listing.id)!,
        ...scoreListing(listing, stats.get(listing.id)!),
      });
  }
  ranking.eligible.sort(
    (a, b) =>
      b.score - a.score ||
      Number(micros(a.listing.price_micros) - micros(b.listing.price_micros)) ||
      a.listing.created_at.getTime() - b.listing.created_at.getTime(),
  );
  return ranking;
}

/** The public view of a candidate (match answers, execute's selection). */
export function candidateView(c: Candidate, rank: number) {
  const successRate = c.stats.calls === 0 ? null : round(c.stats.succeeded / c.stats.calls);
  return {
    rank,
    listing_id: c.listing.id,
    name: c.listing.name,
    slug: c.listing.slug,
    price_usdc: formatUsdc(micros(c.listing.price_micros)),
    latency_ms: c.stats.p50_latency_ms,
    ...(c.stats.p50_latency_ms === null ? { latency_ms_null_reason: "no_recent_successful_calls" } : {}),
    success_rate: successRate,
    ...(successRate === null ? { success_rate_null_reason: "no_recent_calls" } : {}),
    recent_calls: c.stats.calls,
    safe_to_retry: c.listing.safe_to_retry,
    verification_status: c.listing.verification_status,
    score: c.score,
    score_components: c.components,
  };
}
