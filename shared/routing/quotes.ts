import {
  checkListingInput,
  type ListingRow,
  requireListing,
  toolUnavailableReason,
} from "../catalog/index.js";
import { caip2 } from "../chain/client.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError, paidExecutionUnavailable } from "../errors.js";
import { assertWithinSpendLimits, type Principal, scopeBlocked, scopeExclusion } from "../identity/index.js";
import { isUuid } from "../kernel/ids.js";
import { formatUsdc, micros, parseUsdc } from "../kernel/money.js";
import { paidGate, platformSplit } from "../money/index.js";
import { assertNotOwnListing } from "./self-dealing.js";
import { findQuote, insertQuote, type QuoteRow } from "./store/quotes.js";

// One quote model (docs/api.md "Quotes"): a binding price for one listing until expires_at, paid at most
// once. Three rails share it: 'ledger' (an agent's balance, POST /api/quotes, paid by execute or invoke
// with quote_id), 'x402' (the keyless edge's match and 402) and 'tumbler' (the sandbox's tUSDC).

const base = () => getConfig().publicBaseUrl;

/** Why a listing cannot be called directly, or null when it can. */
export function notInvocable(listing: ListingRow): string | null {
  if (listing.status !== "active") return "listing_retired";
  if (listing.review_status !== "approved") return "listing_not_approved";
  if (listing.verification_status === "failed") return "verification_failed";
  return toolUnavailableReason(listing);
}

/** Where to get a new quote of the same kind. */
function newQuoteHint(quote: QuoteRow): string {
  if (quote.rail === "tumbler") return `/api/tumbler/execute/match?task=${encodeURIComponent(quote.task)}`;
  if (quote.rail === "x402") return `/api/x402/execute/match?task=${encodeURIComponent(quote.task)}`;
  return `POST /api/quotes {"listing_id":"${quote.listing_id}"}`;
}

/** A quote that cannot pay for a call: 409 QUOTE_NOT_USABLE with the reason and where to get a new one. */
export function quoteNotUsable(quote: QuoteRow): AppError {
  if (quote.used_at) {
    return new AppError("QUOTE_NOT_USABLE", "this quote was already used; a quote pays for one call", {
      reason: "quote_already_used",
      quote_id: quote.id,
      used_at: quote.used_at.toISOString(),
      invocation_id: quote.invocation_id,
      status_url: quote.invocation_id ? `${base()}/api/execute/status/${quote.invocation_id}` : null,
      new_quote: newQuoteHint(quote),
    });
  }
  return new AppError("QUOTE_NOT_USABLE", "this quote has expired", {
    reason: "quote_expired",
    quote_id: quote.id,
    expired_at: quote.expires_at.toISOString(),
    new_quote: newQuoteHint(quote),
  });
}

/** The quote as every rail shows it. */
export function quoteView(quote: QuoteRow) {
  const price = micros(quote.amount_micros);
  const split = platformSplit(price);
  const status = quote.used_at ? "used" : quote.expires_at.getTime() <= Date.now() ? "expired" : "open";
  return {
    quote_id: quote.id,
    rail: quote.rail,
    listing_id: quote.listing_id,
    task: quote.task,
    price_usdc: formatUsdc(price),
    platform_fee_usdc: formatUsdc(split.feeMicros),
    seller_share_usdc: formatUsdc(split.sellerMicros),
    currency: quote.currency,
    network: quote.network,
    asset: quote.asset,
    pay_to: quote.pay_to,
    expires_at: quote.expires_at.toISOString(),
    status,
    invocation_id: quote.invocation_id,
  };
}

/** The quote of this agent (or a keyless x402 quote, whose id is its capability); others read as 404. */
async function visibleQuote(principal: Principal, quoteId: string): Promise<QuoteRow> {
  const quote = isUuid(quoteId) ? await findQuote(db(), quoteId) : undefined;
  if (!quote || (quote.agent_id !== null && quote.agent_id !== principal.agentId)) {
    throw new AppError("NOT_FOUND", "no quote with this id for this agent", { quote_id: quoteId });
  }
  return quote;
}

/** GET /api/quotes/{quote_id}. */
export async function readQuote(principal: Principal, quoteId: string) {
  return quoteView(await visibleQuote(principal, quoteId));
}

export interface QuoteRequest {
  listingId: string;
  input?: Record<string, unknown>;
  maxCostUsdc?: number;
}

/**
 * POST /api/quotes: binds the listing's current price for this agent until expires_at (X402_QUOTE_TTL_SECONDS,
 * the same life as an x402 quote). Refused as a direct invoke would be: unknown 404, not invocable 422,
 * own listing 403, outside the key's scopes 403, over max_cost 422, input (when given) 400, paid while
 * paid execution is closed 503, over the key's per-call limit 403. The answer lists how it can be paid
 * and the constraints it was checked against.
 */
export async function createQuote(principal: Principal, req: QuoteRequest) {
  const listing = await requireListing(req.listingId);
  assertNotOwnListing(principal, listing);
  const blocked = notInvocable(listing);
  if (blocked) {
    throw new AppError("LISTING_NOT_INVOCABLE", `this listing cannot be quoted: ${blocked}`, {
      reason: blocked,
    });
  }
  const scope = scopeExclusion(principal.policy, listing);
  if (scope) throw scopeBlocked(listing, scope);
  const price = micros(listing.price_micros);
  const maxCost = req.maxCostUsdc === undefined ? null : parseUsdc(req.maxCostUsdc, "/max_cost");
  if (maxCost !== null && price > maxCost) {
    throw new AppError("LISTING_NOT_INVOCABLE", "the listing's price is above max_cost", {
      reason: "over_max_cost",
      price_usdc: formatUsdc(price),
      max_cost_usdc: formatUsdc(maxCost),
    });
  }
  if (req.input !== undefined) checkListingInput(listing, req.input);
  const paid = price > 0n;
  if (paid) {
    const gate = await paidGate();
    if (!gate.enabled) throw paidExecutionUnavailable(gate.reason ?? "paid_execution_disabled");
    await assertWithinSpendLimits(principal, price);
  }
  const config = getConfig();
  const quote = await insertQuote(db(), {
    rail: "ledger",
    listing_id: listing.id,
    task: listing.slug,
    agent_id: principal.agentId,
    currency: "USDC",
    amount_micros: price,
    network: caip2(config.chainId),
    asset: config.usdcAddress,
    pay_to: null,
    ttlSeconds: config.x402QuoteTtlSeconds,
  });
  return {
    ...quoteView(quote),
    payment_options: [
      {
        method: "ledger",
        how: `POST /api/invoke/${listing.id} or POST /api/execute with "quote_id"; held from your balance, charged only on success`,
        url: `${base()}/api/invoke/${listing.id}`,
      },
      ...(paid
        ? [
            {
              method: "x402",
              how: "no key needed: the x402 edge quotes and challenges this listing itself",
              url: `${base()}/api/x402/invoke/${listing.id}`,
            },
            {
              method: "mpp",
              how: "the same edge, paid with Authorization: Payment",
              url: `${base()}/api/x402/invoke/${listing.id}`,
            },
          ]
        : []),
    ],
    constraints: {
      listing_invocable: true,
      input_valid: req.input === undefined ? null : true,
      max_cost_usdc: maxCost === null ? null : formatUsdc(maxCost),
      within_max_cost: maxCost === null ? null : true,
      within_key_limits: true,
      paid_execution_enabled: paid ? true : null,
    },
  };
}

/**
 * The ledger quote an execute or invoke pays: this agent's, for this listing (invoke names one; execute
 * takes the quote's), not used, not expired.
 * Unknown or another agent's → 404; used or expired → 409 QUOTE_NOT_USABLE; another listing → 409 with
 * reason quote_listing_mismatch. A used quote is let through when the request carries an idempotency key:
 * the submission then replays the call that used it, or refuses it inside its transaction.
 */
export async function quoteToPay(
  principal: Principal,
  quoteId: string,
  listingId: string | undefined,
  replayable: boolean,
): Promise<QuoteRow> {
  const quote = isUuid(quoteId) ? await findQuote(db(), quoteId) : undefined;
  if (quote?.rail !== "ledger" || quote.agent_id !== principal.agentId) {
    throw new AppError("NOT_FOUND", "no quote with this id for this agent", {
      quote_id: quoteId,
      hint: 'POST /api/quotes {"listing_id": …} for a quote',
    });
  }
  if (listingId !== undefined && quote.listing_id !== listingId) {
    throw new AppError("QUOTE_NOT_USABLE", "this quote is for another listing", {
      reason: "quote_listing_mismatch",
      quote_id: quote.id,
      quoted_listing_id: quote.listing_id,
      new_quote: newQuoteHint(quote),
    });
  }
  if (quote.used_at && replayable) return quote;
  if (quote.used_at || quote.expires_at.getTime() <= Date.now()) throw quoteNotUsable(quote);
  return quote;
}
