import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { LOCAL_CHAIN_ID } from "../money/index.js";
import { publishedJwks } from "../routing/index.js";
import type { LiveFacts } from "./facts.js";
import type { DiscoverySources } from "./sources.js";
import {
  evidenceByState,
  hostedProbeTotals,
  invocationsByRoute,
  listingCounts,
  recentOnChain,
  statusCounts,
} from "./store.js";

// /public-proof.json: figures computed from live rows, each with when it was computed, and null with a
// *_null_reason wherever there is no evidence. Nothing here is a constant.

const UPTIME_DAYS = 30;

function explorerLink(
  facts: LiveFacts,
  txHash: string,
): { url: string | null; url_null_reason: string | null } {
  const explorer = getConfig().chainExplorerUrl;
  if (facts.chainId === LOCAL_CHAIN_ID) return { url: null, url_null_reason: "local_development_chain" };
  return { url: `${explorer.replace(/\/$/, "")}/tx/${txHash}`, url_null_reason: null };
}

export async function publicProof(sources: DiscoverySources, facts: LiveFacts) {
  const q = db();
  const at = () => new Date().toISOString();
  const routes = await invocationsByRoute(q);
  const byRoute = {
    computed_at: at(),
    routes: routes.map((r) => {
      const finished = r.succeeded + r.failed;
      return {
        ...r,
        success_rate: finished > 0 ? r.succeeded / finished : null,
        success_rate_null_reason: finished > 0 ? null : "no_finished_invocations",
      };
    }),
  };
  const onChain = async (table: "x402_payments" | "payouts" | "deposits") => ({
    computed_at: at(),
    by_status: await statusCounts(q, table),
    recent: (await recentOnChain(q, table)).map((r) => ({
      tx_hash: r.tx_hash,
      block_number: r.block_number,
      at: new Date(r.at).toISOString(),
      explorer: explorerLink(facts, r.tx_hash),
    })),
  });
  const listings = await listingCounts(q);
  const probes = await hostedProbeTotals(q, UPTIME_DAYS);
  const jwks = await publishedJwks();
  return {
    schema: "agentmarket.public-proof.v1",
    base_url: sources.baseUrl,
    network: facts.network,
    generated_at: at(),
    invocations: byRoute,
    settlement: {
      x402_payments: await onChain("x402_payments"),
      deposits: await onChain("deposits"),
      evidence_rows_by_state: { computed_at: at(), counts: await evidenceByState(q) },
    },
    payouts: await onChain("payouts"),
    listings: { computed_at: at(), active: listings.active, platform_hosted: listings.hosted },
    hosted_tool_uptime: {
      computed_at: at(),
      window_days: UPTIME_DAYS,
      probes: probes.probes,
      uptime: probes.probes > 0 ? probes.ok / probes.probes : null,
      uptime_null_reason:
        listings.hosted === 0
          ? "no_platform_hosted_listings"
          : probes.probes === 0
            ? "no_probes_recorded"
            : null,
    },
    signing_keys: {
      computed_at: at(),
      jwks_url: facts.jwksUrl,
      kids: jwks.keys.map((k) => k.kid),
    },
  };
}
