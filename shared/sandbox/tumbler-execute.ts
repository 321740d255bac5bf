import { checkListingInput, findListing, type ListingRow, toolUnavailableReason } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import {
  isScopeExclusion,
  type Principal,
  scopeBlocked,
  scopeExclusion,
  scopesExcludeTask,
} from "../identity/index.js";
import { isUuid, newTimeOrderedId } from "../kernel/ids.js";
import { formatUsdc, micros } from "../kernel/money.js";
import { type PaidGate, retryTransient } from "../money/index.js";
import {
  assertNotOnlyOwnListings,
  assertNotOwnListing,
  awaitInvocation,
  dispatchExecution,
  executeResult,
  findQuote,
  holdForInvocation,
  type InvocationRow,
  insertInvocationWithJob,
  insertQuote,
  type NewInvocation,
  openCircuits,
  pendingResult,
  quoteNotUsable,
  rankCandidates,
  useQuote,
} from "../routing/index.js";
import { SANDBOX_NOTE } from "./tumbler.js";

// Sandbox quotes and execution (docs/x402.md "Sandbox (tumbler)"). A quote binds one tumbler-enabled listing
// and its price in tUSDC for TUMBLER_QUOTE_TTL_SECONDS; executing it takes the same path as a paid
// direct invoke — invocation, quote use and tUSDC hold in one transaction, the executions worker calls
// the seller's endpoint (safe fetch, signed request, limits), capture 97/3 or release — with tUSDC as
// the invocation's currency. No fallback: the buyer accepted one listing's quote.

/**
 * The paid-execution gate guards real funds; the sandbox moves none (tUSDC is simulated), so its ranking
 * treats priced listings as payable whatever /market.json says. Every other rule of the router applies.
 */
const SANDBOX_GATE: PaidGate = { enabled: true, reason: null };

const ROUTE = "POST /api/tumbler/execute";

function base(): string {
  return getConfig().publicBaseUrl;
}

/**
 * GET /api/tumbler/execute/match: ranks like the router but only tumbler_enabled listings (active,
 * approved, not verified failed, circuit closed, within the key's scopes — the seller's endpoint really
 * receives the input), quotes the top one in tUSDC at its price and returns the quote with how to
 * execute it. Every candidate outside the key's scopes → 403 POLICY_BLOCKED; none → 404.
 */
export async function quoteSandboxTask(principal: Principal, task: string) {
  const ranking = await rankCandidates(task, null, SANDBOX_GATE, openCircuits, {
    tumblerOnly: true,
    policy: principal.policy,
    buyerAgentId: principal.agentId,
  });
  const chosen = ranking.eligible[0];
  assertNotOnlyOwnListings(task, ranking);
  if (!chosen && ranking.excluded.length > 0 && ranking.excluded.every((e) => isScopeExclusion(e.reason))) {
    throw scopesExcludeTask(task, ranking.excluded);
  }
  if (!chosen) {
    throw new AppError("LISTING_NOT_FOUND", `no sandbox-enabled listing answers to task "${task}"`, {
      task,
      excluded: ranking.excluded.map((e) => ({ listing_id: e.listing.id, reason: e.reason })),
      hint:
        "only listings whose sellers enabled the sandbox (tumbler_enabled: 1 in GET /api/capabilities) " +
        "can be called here; GET /api/execute/match shows every listing for the task",
    });
  }
  const { listing } = chosen;
  const ttlSeconds = getConfig().tumblerQuoteTtlSeconds;
  const quote = await insertQuote(db(), {
    rail: "tumbler",
    listing_id: listing.id,
    task,
    currency: "tUSDC",
    agent_id: principal.agentId,
    amount_micros: micros(listing.price_micros),
    ttlSeconds,
  });
  return {
    quote_id: quote.id,
    rail: "tumbler" as const,
    currency: "tUSDC" as const,
    simulated: true as const,
    amount_tusdc: formatUsdc(micros(quote.amount_micros)),
    expires_at: quote.expires_at.toISOString(),
    ttl_seconds: ttlSeconds,
    task,
    listing: {
      listing_id: listing.id,
      name: listing.name,
      slug: listing.slug,
      price_tusdc: formatUsdc(micros(listing.price_micros)),
      input_schema: listing.input_schema,
      output_schema: listing.output_schema,
      safe_to_retry: listing.safe_to_retry,
      verification_status: listing.verification_status,
      score: chosen.score,
      score_components: chosen.components,
    },
    other_eligible_listings: ranking.eligible.length - 1,
    execute: {
      method: "POST" as const,
      url: `${base()}/api/tumbler/execute`,
      body: { quote_id: quote.id, input: "<an object valid against listing.input_schema>" },
    },
    note:
      "simulated: true — the price is charged in tUSDC, but the seller's endpoint really runs with your " +
      `input. The quote can be executed once, until expires_at. ${SANDBOX_NOTE}`,
  };
}

/** Why a quoted listing can no longer be called in the sandbox, or null when it can. */
function notCallable(listing: ListingRow): string | null {
  if (listing.status !== "active") return "listing_retired";
  if (listing.review_status !== "approved") return "listing_not_approved";
  if (listing.verification_status === "failed") return "verification_failed";
  if (!listing.tumbler_enabled) return "tumbler_disabled";
  return toolUnavailableReason(listing);
}

/** useQuote found the quote used or expired inside the transaction (a concurrent execute, or the clock). */
class QuoteTaken extends Error {}

/**
 * POST /api/tumbler/execute: executes a sandbox quote. Unknown, another agent's or a non-sandbox quote →
 * 404; used or expired → 409 QUOTE_NOT_USABLE; listing no longer callable → 422; outside the executing
 * key's scopes → 403; input against the listing's schema → 400. Spend limits and approvals do not apply:
 * they govern real money. Then one transaction: the invocation (route tumbler, currency tUSDC, the
 * quoted listing only), the quote marked used, the tUSDC hold with its simulated authorization evidence;
 * short tUSDC → 402 and nothing is written (the quote stays usable). Enqueued after commit and awaited
 * like /api/execute: the result, or 202 with the status URL.
 */
export async function executeSandboxQuote(
  principal: Principal,
  quoteId: string,
  input: Record<string, unknown>,
  requestId: string,
) {
  const quote = isUuid(quoteId) ? await findQuote(db(), quoteId) : undefined;
  if (quote?.rail !== "tumbler" || quote.agent_id !== principal.agentId) {
    throw new AppError("NOT_FOUND", "no sandbox quote with this id for this agent", {
      quote_id: quoteId,
      hint: "GET /api/tumbler/execute/match?task=<task> for a quote",
    });
  }
  if (quote.used_at || quote.expires_at.getTime() <= Date.now()) throw quoteNotUsable(quote);
  const listing = await findListing(db(), quote.listing_id);
  const blocked = listing ? notCallable(listing) : "listing_retired";
  if (!listing || blocked) {
    throw new AppError("LISTING_NOT_INVOCABLE", `the quoted listing cannot be called: ${blocked}`, {
      reason: blocked,
      listing_id: quote.listing_id,
      new_quote: `/api/tumbler/execute/match?task=${encodeURIComponent(quote.task)}`,
    });
  }
  assertNotOwnListing(principal, listing);
  // The quoting key may not be the executing one: the executing key's scopes decide whom its input reaches.
  const scoped = scopeExclusion(principal.policy, listing);
  if (scoped) throw scopeBlocked(listing, scoped);
  checkListingInput(listing, input);

  const amountMicros = micros(quote.amount_micros);
  const invocationId = newTimeOrderedId();
  const row: NewInvocation = {
    id: invocationId,
    agent_id: principal.agentId,
    api_key_id: principal.apiKeyId,
    listing_id: listing.id,
    task: quote.task,
    route: "tumbler",
    currency: "tUSDC",
    input,
    max_cost_micros: null,
    price_micros: amountMicros,
    hold_micros: amountMicros,
    candidate_ids: [listing.id],
    selection: {
      strategy: "sandbox_quote",
      reason: "the sandbox calls the quoted listing only; no fallback",
      quote_id: quote.id,
      candidates: [],
    },
  };
  let _invocation: InvocationRow;
  try {
    _invocation = await retryTransient(() =>
      db().transaction(async (trx) => {
        const inserted = await insertInvocationWithJob(trx, row, "executions");
        if (!(await useQuote(trx, quote.id, invocationId))) throw new QuoteTaken();
        if (amountMicros > 0n) {
          await holdForInvocation(
            trx,
            {
              id: invocationId,
              agent_id: principal.agentId,
              api_key_id: principal.apiKeyId,
              currency: "tUSDC",
            },
            amountMicros,
            { listedPriceMicros: amountMicros, maxCostMicros: null, route: ROUTE, quoteId: quote.id },
          );
        }
        return inserted;
      }),
    );
  } catch (error) {
    if (!(error instanceof QuoteTaken)) throw error;
    const current = await findQuote(db(), quote.id);
    throw quoteNotUsable(current ?? quote);
  }
  const completion = await dispatchExecution(invocationId, requestId);
  const summary = await awaitInvocation(invocationId, completion);
  if (summary.status === "succeeded" || summary.status === "failed") {
    return { done: true as const, body: executeResult(summary) };
  }
  return { done: false as const, body: pendingResult(summary) };
}
