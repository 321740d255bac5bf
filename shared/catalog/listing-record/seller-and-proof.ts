import type { ListingFacts } from "../listing-facts.js";
import { ACTIVE_MAX_DAYS, IDLE_MAX_DAYS } from "./basis.js";
import { explained, nullReason } from "./values.js";

/**
 * Seller summary, activity and public proof of a listing: the read-time fields that describe who sells
 * it and what evidence of use exists, each computed from the facts or null with a reason.
 */

function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
}

/** No seller has a trust model yet: the same four fields for every listing, built once. */
const NO_TRUST = {
  seller_trust_score: null as number | null,
  ...nullReason("seller_trust_score", null, "no_trust_model_yet"),
  ...explained("seller_trust_grade", null as string | null, "no_trust_model_yet"),
  ...explained("seller_trust_badge", null as string | null, "no_trust_model_yet"),
  ...explained("seller_trust_confidence", null as string | null, "no_trust_model_yet"),
};

/**
 * seller_* fields. First-party listings are sold by the platform itself; external sellers have no tier,
 * trust model or identity verification yet, so those are null with a reason or false (never claimed).
 */
export function sellerSummary(facts: ListingFacts) {
  const { listing, seller, platformId } = facts;
  const firstParty = listing.public_supply_origin === "first_party_service";
  if (firstParty) {
    return {
      seller_name: platformId as string | null,
      seller_tier: "platform" as string | null,
      // The platform operates first-party listings itself; there is no third party to verify.
      seller_verified: true,
      seller_human_verified: false,
      seller_agent_uri: `urn:${platformId}:platform` as string | null,
      seller_agent_uri_slug: platformId as string | null,
      ...NO_TRUST,
    };
  }
  const missing = "seller_record_not_found";
  const name = seller?.name ?? null;
  return {
    seller_name: name,
    ...nullReason("seller_name", name, missing),
    ...explained("seller_tier", null as string | null, seller ? "no_seller_tier_model_yet" : missing),
    // No seller verification exists yet, so no external seller is verified.
    seller_verified: false,
    seller_human_verified: false,
    ...explained("seller_agent_uri", seller ? `urn:${platformId}:agent:${seller.id}` : null, missing),
    ...explained(
      "seller_agent_uri_slug",
      seller ? `${slugify(seller.name) || "seller"}-${seller.id.slice(0, 8)}` : null,
      missing,
    ),
    ...NO_TRUST,
  };
}

export type ActivityStatus = "active" | "idle" | "dormant";

/**
 * activity_status from whole days since the last invocation: active ≤ 7, idle ≤ 30, dormant beyond
 * or never invoked. days_since_last_invoke is the same whole-day count (floor), so the two agree.
 */
export function activity(facts: ListingFacts) {
  const days = facts.daysSinceLastInvoke;
  if (days === null) {
    return {
      activity_status: "dormant" as ActivityStatus,
      ...explained("days_since_last_invoke", null as number | null, "never_invoked"),
    };
  }
  const status: ActivityStatus =
    days <= ACTIVE_MAX_DAYS ? "active" : days <= IDLE_MAX_DAYS ? "idle" : "dormant";
  return {
    activity_status: status,
    ...explained("days_since_last_invoke", days as number | null, "never_invoked"),
  };
}

export type PublicProofStatus =
  | "verification_failed"
  | "proven_in_use"
  | "endpoint_verified"
  | "endpoint_reachable"
  | "unproven";

const PROOF_LABELS: Record<PublicProofStatus, string> = {
  verification_failed: "Endpoint verification failed",
  proven_in_use: "Proven in use",
  endpoint_verified: "Endpoint verified",
  endpoint_reachable: "Endpoint reachable",
  unproven: "No runtime proof yet",
};

/**
 * public_proof_*: a failed verdict outranks past use (it is the newer, negative signal); otherwise
 * successful calls, then the verdict, then nothing.
 */
export function publicProof(facts: ListingFacts) {
  const { listing, stats, reviews } = facts;
  let status: PublicProofStatus = "unproven";
  if (listing.verification_status === "failed") status = "verification_failed";
  else if (stats.success_count > 0) status = "proven_in_use";
  else if (listing.verification_status === "verified") status = "endpoint_verified";
  else if (listing.verification_status === "reachable") status = "endpoint_reachable";
  const runtimeStatus =
    listing.status !== "active"
      ? "retired"
      : stats.success_count > 0
        ? "live_with_successful_calls"
        : "live_no_successful_calls";
  return {
    public_proof_status: status,
    public_proof_label: PROOF_LABELS[status],
    public_proof_summary:
      `${stats.success_count} successful of ${stats.total_invocations} routed invocations; ` +
      `${stats.paid_success_count} paid; ${reviews.receipt_linked_review_count} receipt-linked reviews; ` +
      `verification: ${listing.verification_status ?? "never run"}.`,
    public_proof_evidence: {
      runtime_status: runtimeStatus,
      successful_calls: stats.success_count,
      total_calls: stats.total_invocations,
      paid_calls: stats.paid_success_count,
      receipt_linked_reviews: reviews.receipt_linked_review_count,
    },
  };
}
