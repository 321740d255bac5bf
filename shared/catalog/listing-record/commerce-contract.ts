import type { Basis } from "./basis.js";
import { PAID_SETTLEMENT_RAIL } from "./basis.js";

/**
 * The commerce contract: what buying this listing commits buyer and seller to. A positive price only
 * records a proposed contract (spec "States and transitions" rule 4); maturity says whether paid
 * execution can actually happen now.
 */

/** maturity {status, note}: live, proposed (paid behind a closed gate), withheld or retired. */
function maturity(b: Basis) {
  const { listing } = b.facts;
  if (listing.status !== "active") {
    return { status: "retired", note: "The listing is retired; it is kept so receipts stay readable." };
  }
  if (!b.registryVisible) {
    return {
      status: "withheld",
      note: `The listing is not in the public registry: ${b.registryBlockers.join(", ")}.`,
    };
  }
  if (b.paidBlocker) {
    return {
      status: "proposed_contract",
      note:
        `Paid execution is unavailable (${b.paidUnavailableReason}): the price records a proposed contract ` +
        "only; it authorizes no charge, provider call, payout or settlement. Read /market.json before any paid action.",
    };
  }
  return {
    status: "live",
    note: b.requiresPayment
      ? "Paid per call in USDC; charged only when an invocation succeeds, with a receipt."
      : "Free per call; every succeeded invocation has a receipt.",
  };
}

/** The spec's commerce_contract block, schema `<platform>.commerce-contract.v1`. */
export function buildCommerceContract(b: Basis) {
  const { listing, platformId } = b.facts;
  return {
    schema: `${platformId}.commerce-contract.v1`,
    product_type: listing.listing_type,
    pricing_model: listing.pricing_model,
    unit_price_usdc: b.unitPriceUsdc,
    currency: listing.currency,
    settlement_rail: b.requiresPayment ? PAID_SETTLEMENT_RAIL : "free",
    settlement_available: !b.requiresPayment || b.paidBlocker === null,
    delivery: {
      mode: "hosted_router",
      // POST /api/execute answers 200 with the result when it ends within the sync budget...
      synchronous: true,
      // ...else 202 with a status URL to poll.
      async_supported: true,
      recurring_supported: false,
    },
    buyer_commitment: {
      requires_payment: b.requiresPayment,
      // Every invoking route needs a bearer API key (an agent identity).
      requires_agent_identity: true,
      requires_subscription: false,
      requires_escrow: false,
    },
    trust_requirements: {
      // Paid work must be backed by a receipt; free work gets one too but nothing rides on it.
      receipt_required: b.requiresPayment,
      seller_verification_recommended: !b.firstParty && listing.verification_status !== "verified",
      policy_check_recommended: b.requiresPayment || b.reviewRiskFlags.length > 0,
      // There is no escrow product; recommending one would point buyers at nothing.
      escrow_recommended: false,
    },
    contract_features: {
      supports_retries: listing.safe_to_retry,
      // Refunds and reviews have no tables yet (listing-facts.ts); they are not offered.
      supports_refunds: false,
      supports_reviews: false,
      supports_sla: false,
      supports_human_fallback: false,
    },
    maturity: maturity(b),
  };
}

export type CommerceContract = ReturnType<typeof buildCommerceContract>;
