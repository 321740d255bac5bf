import type { Principal } from "../identity/index.js";
import { formatUsdc, parseUsdc } from "../kernel/money.js";
import { paidGate } from "../money/index.js";
import { openCircuits } from "./circuits.js";
import { candidateView, rankCandidates, WEIGHTS } from "./router.js";

const FORMULA =
  "score = 0.40·reliability + 0.25·verification + 0.20·latency + 0.15·price; reliability = (ok+1)/(attempts+2) " +
  "over 30 days; verification: verified 1, reachable 0.7, unchecked 0.4; latency = 1/(1+p50 s); price = 1/(1+USDC)";

/**
 * GET /api/execute/match: the eligible providers for a task in the order execute would try them. With
 * the calling key's policy, listings outside its scopes are excluded with the scope as the reason, and
 * the caller's own listings as own_listing.
 */
export async function matchProviders(task: string, maxCostUsdc: number | undefined, principal?: Principal) {
  const maxCostMicros = maxCostUsdc === undefined ? null : parseUsdc(maxCostUsdc, "/query/max_cost");
  const ranking = await rankCandidates(task, maxCostMicros, paidGate, openCircuits, {
    policy: principal?.policy,
    buyerAgentId: principal?.agentId,
  });
  return {
    task,
    max_cost_usdc: maxCostMicros === null ? null : formatUsdc(maxCostMicros),
    candidates: ranking.eligible.map((c, i) => candidateView(c, i + 1)),
    excluded: ranking.excluded.map((e) => ({
      listing_id: e.listing.id,
      name: e.listing.name,
      reason: e.reason,
    })),
    ranking: { formula: FORMULA, weights: { ...WEIGHTS } },
  };
}
