import { type ListingRow, toolUnavailableReason } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { micros } from "../kernel/money.js";
import { insertQuote, type QuoteRow } from "../routing/index.js";
import { x402Rail } from "./protocol.js";

// What the x402 edge sells and at what quote: which listings are payable here, and the quote (price,
// network, asset, pay-to, expiry) a challenge and the paid retry both refer to.

/** A quote on the x402 rail for a listing at its current price. */
export async function createQuote(listing: ListingRow, task: string): Promise<QuoteRow> {
  const rail = x402Rail();
  if (!rail)
    throw new AppError("TEMPORARILY_UNAVAILABLE", "no x402 rail is configured", { reason: "no_rail" });
  return insertQuote(db(), {
    rail: "x402",
    listing_id: listing.id,
    task,
    currency: "USDC",
    amount_micros: micros(listing.price_micros),
    network: rail.network,
    asset: rail.asset,
    pay_to: rail.payTo,
    ttlSeconds: getConfig().x402QuoteTtlSeconds,
  });
}

/** Why a listing cannot be bought on the x402 edge, or null. Free listings are not sold here. */
export function notPayable(listing: ListingRow): string | null {
  if (listing.status !== "active") return "listing_retired";
  if (listing.review_status !== "approved") return "listing_not_approved";
  if (listing.verification_status === "failed") return "verification_failed";
  const tool = toolUnavailableReason(listing);
  if (tool) return tool;
  if (micros(listing.price_micros) === 0n) return "free_listing_use_keyed_routes";
  return null;
}

/** Refuses a listing that cannot be bought on the x402 edge, with where to look instead. */
export function assertPayable(listing: ListingRow): void {
  const reason = notPayable(listing);
  if (!reason) return;
  throw new AppError("LISTING_NOT_INVOCABLE", `this listing cannot be bought over x402: ${reason}`, {
    reason,
    ...(reason === "free_listing_use_keyed_routes"
      ? {
          hint: "free listings need no payment: POST /api/invoke/{listing_id} with an API key (POST /api/quickstart)",
        }
      : { hint: "GET /api/x402/execute/match?task=… or GET /api/x402/listings" }),
  });
}
