import type { ListingFacts } from "../listing-facts.js";
import { type BuildOptions, deriveBasis, PLATFORM_MAX_LATENCY_MS } from "./basis.js";
import { buildBuyerEvidence } from "./buyer-evidence.js";
import { buildCommerceContract } from "./commerce-contract.js";
import { buildCompleteness, readinessChecks } from "./completeness.js";
import { buildExportProfiles } from "./export-profiles.js";
import { buildInvocationContract } from "./invocation-contract.js";
import { activity, publicProof, sellerSummary } from "./seller-and-proof.js";
import { supplyFields } from "./supply.js";
import { buildTelemetry } from "./telemetry.js";
import { explained, flag, isoOrNull, nullReason, oneDecimal, ratio } from "./values.js";

/**
 * The public listing record (spec "Listing (capability)", read-time fields and nested objects), built
 * by a pure function of ListingFacts: no I/O, no clock, and no value without evidence.
 */

export {
  ACTIVE_MAX_DAYS,
  type BuildOptions,
  DEFAULT_IDEMPOTENCY_RETENTION_HOURS,
  IDLE_MAX_DAYS,
  PAID_SETTLEMENT_RAIL,
  PLATFORM_MAX_LATENCY_MS,
  ROUTER_MAX_ATTEMPTS,
  SETTLEMENT_NETWORK,
} from "./basis.js";
export { SPEC_FAILURE_CODES } from "./invocation-contract.js";

/**
 * Proxy settings without secrets: the upstream URL is a seller's (or a managed provider's) private
 * address and header values may be credentials, so only whether they exist and the header names show.
 */
function proxyFields(facts: ListingFacts) {
  const { listing } = facts;
  return {
    proxy_mode: listing.proxy_mode,
    ...explained(
      "proxy_upstream_url",
      null as string | null,
      listing.proxy_upstream_url === null
        ? "no_proxy_upstream_configured"
        : "upstream_url_withheld_not_public",
    ),
    proxy_headers: Object.fromEntries(
      Object.keys(listing.proxy_headers ?? {}).map((name) => [name, "[redacted]"]),
    ),
    proxy_strip_path: flag(listing.proxy_strip_path),
  };
}

function reviewFields(facts: ListingFacts) {
  const { listing } = facts;
  return {
    review_status: listing.review_status,
    ...explained("review_score", listing.review_score, "not_scored_by_reviewer"),
    ...explained("review_notes", listing.review_notes, "no_review_notes"),
    ...explained("reviewed_at", isoOrNull(listing.reviewed_at), "not_reviewed"),
    ...explained("reviewed_by", listing.reviewed_by, "not_reviewed"),
  };
}

function healthFields(facts: ListingFacts) {
  const { health, stats, listing } = facts;
  return {
    verification_status: listing.verification_status,
    ...nullReason("verification_status", listing.verification_status, "never_verified"),
    ...explained("endpoint_health", health.latest_status, "no_health_probes_recorded"),
    // Rates are 0..1 ratios; the telemetry block carries the same bases as percentages.
    ...explained(
      "endpoint_health_rate",
      ratio(health.probe_success_30d, health.probe_count_30d),
      "no_health_probes_recorded",
    ),
    ...explained(
      "success_rate",
      ratio(stats.successful_attempts_30d, stats.attempts_30d),
      "no_attempts_in_30d",
    ),
  };
}

/** The full public record of one listing: every read-time field plus the nested contract blocks. */
export function buildListingRecord(facts: ListingFacts, options: BuildOptions = {}) {
  const { listing, stats, reviews } = facts;
  const b = deriveBasis(facts, options);
  const checks = readinessChecks(b);
  const telemetry = buildTelemetry(facts);
  const completeness = buildCompleteness(b, checks);
  const exportProfiles = buildExportProfiles(b, checks);
  const commerce = buildCommerceContract(b);
  const invocation = buildInvocationContract(b, checks, telemetry, completeness);
  const seller = sellerSummary(facts);
  // The spec's read-time table types these as integer 0/1 (served so below); `flags` carries them as
  // JSON booleans. One derivation for both.
  const flags = {
    // The platform runs the provider (a path on the platform); there is no hosted-agent runtime.
    hosted: b.endpointType === "platform_hosted",
    featured: listing.featured,
    safe_to_retry: listing.safe_to_retry,
    platform_hosted: listing.platform_hosted,
    tumbler_enabled: listing.tumbler_enabled,
  };
  const buyerEvidence = buildBuyerEvidence(b, {
    providerName: seller.seller_name,
    commerce,
    invocation,
    exportProfiles,
  });
  return {
    id: listing.id,
    ...explained("seller_id", listing.seller_id, "first_party_listing_platform_is_seller"),
    slug: listing.slug,
    name: listing.name,
    description: listing.description,
    long_description: listing.long_description,
    category: listing.category,
    tags: [...listing.tags],
    listing_type: listing.listing_type,
    delivery_method: listing.delivery_method,
    version: listing.version,
    input_schema: listing.input_schema,
    ...explained("output_schema", listing.output_schema, "seller_did_not_declare_output_schema"),
    hosted: flag(flags.hosted),
    runtime: listing.runtime,
    pricing_model: listing.pricing_model,
    price_per_unit: Number(b.unitPriceUsdc),
    currency: listing.currency,
    // What a buyer can rely on: the declared limit, capped by the platform's limit on any provider call.
    max_latency_ms: Math.min(listing.max_latency_ms, PLATFORM_MAX_LATENCY_MS),
    rate_limit: listing.rate_limit,
    concurrency_limit: listing.concurrency_limit,
    data_retention: listing.data_retention,
    allowed_use: listing.allowed_use,
    risk_flags: [...listing.risk_flags],
    required_scopes: [...listing.required_scopes],
    total_invocations: stats.total_invocations,
    success_count: stats.success_count,
    failure_count: stats.failure_count,
    ...explained("avg_latency_ms", oneDecimal(stats.avg_latency_ms), "no_successful_calls_in_30d"),
    status: listing.status,
    featured: flag(flags.featured),
    safe_to_retry: flag(flags.safe_to_retry),
    platform_hosted: flag(flags.platform_hosted),
    tumbler_enabled: flag(flags.tumbler_enabled),
    flags,
    ...reviewFields(facts),
    ...proxyFields(facts),
    created_at: listing.created_at.toISOString(),
    updated_at: listing.updated_at.toISOString(),
    ...explained("last_invoked_at", isoOrNull(stats.last_invoked_at), "never_invoked"),
    ...explained("last_paid_success_at", isoOrNull(stats.last_paid_success_at), "no_paid_success_recorded"),
    ...explained("verified_at", isoOrNull(listing.verified_at), "never_verified"),
    paid_success_count: stats.paid_success_count,
    refunded_paid_count: stats.refunded_paid_count,
    ...seller,
    // String numerics, as the spec serves them.
    verified_review_count: String(reviews.verified_review_count),
    receipt_linked_review_count: String(reviews.receipt_linked_review_count),
    ...explained("avg_review_rating", reviews.avg_rating?.toFixed(2) ?? null, "no_reviews_recorded"),
    ...healthFields(facts),
    ...activity(facts),
    ...publicProof(facts),
    ...supplyFields(b),
    commerce_contract: commerce,
    invocation_contract: invocation,
    telemetry,
    completeness,
    buyer_evidence: buyerEvidence,
    export_profiles: exportProfiles,
  };
}

/** The public listing record as served (catalog pages, listing reads). */
export type ListingRecord = ReturnType<typeof buildListingRecord>;
