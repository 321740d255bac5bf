import type { Basis } from "./basis.js";
import type { CommerceContract } from "./commerce-contract.js";
import type { ExportProfiles } from "./export-profiles.js";
import type { InvocationContract } from "./invocation-contract.js";
import { retryGuidance } from "./invocation-contract.js";
import { summarizeSchema } from "./schema-examples.js";
import { latencyMetrics, uptime7dPct, uptime30dPct } from "./telemetry.js";
import { explained, isoOrNull, nullReason, oneDecimal, percent } from "./values.js";

/**
 * Buyer evidence: one block an agent can read to decide whether to call this listing, with every
 * number traceable to invocations, probes or reviews, and copy-paste commands that actually work.
 */

/**
 * Aliases POST /api/execute resolves to this listing: tags, slug, category and lowercase name. The
 * router lowercases the task and compares exactly, so a value with upper case could never match and is
 * left out.
 */
export function taskAliases(b: Basis): string[] {
  const { listing } = b.facts;
  const candidates = [...listing.tags, listing.slug, listing.category, listing.name.toLowerCase()];
  return [...new Set(candidates.filter((a) => a.length > 0 && a === a.trim().toLowerCase()))];
}

/** POSIX single-quoting, so a JSON body with quotes survives the shell. */
function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

function curlPost(url: string, body: unknown): string {
  return (
    `curl -s -X POST ${shellQuote(url)} -H "Authorization: Bearer $API_KEY" ` +
    `-H 'Content-Type: application/json' -d ${shellQuote(JSON.stringify(body))}`
  );
}

/** curl commands for match, execute and direct invoke; calls are withheld when they would be refused. */
function copyPaste(b: Basis, contract: InvocationContract) {
  const { baseUrl } = b.facts;
  const { execute, direct_invoke } = contract.example_request;
  // Paid routes must not be called while the gate is closed (spec part 1), so no command is offered.
  const refusal =
    b.notInvokableReasons.length > 0 ? `listing_not_invokable:${b.notInvokableReasons.join(",")}` : "";
  return {
    match: `curl -s ${shellQuote(`${baseUrl}${b.paths.match}`)} -H "Authorization: Bearer $API_KEY"`,
    ...explained("execute", refusal ? null : curlPost(execute.url, execute.body), refusal),
    ...explained("direct_invoke", refusal ? null : curlPost(direct_invoke.url, direct_invoke.body), refusal),
  };
}

function visibility(b: Basis) {
  let note: string;
  if (!b.registryVisible) note = `Not listed in any catalog lane: ${b.registryBlockers.join(", ")}.`;
  else if (!b.searchVisible) {
    note =
      "Registry lane only: no verified/reachable verdict and no successful call yet, so search omits it.";
  } else if (b.featuredCandidate) {
    note =
      "Curated and in the search lane; the featured lane also caps listings per seller, which it may hit.";
  } else {
    note = "In the registry and search lanes; not curated for the featured lane.";
  }
  return {
    registry_visible: b.registryVisible,
    search_visible: b.searchVisible,
    featured_candidate: b.featuredCandidate,
    public_tier: b.publicTier,
    note,
  };
}

/** `<metric>_source` beside each latency metric: its basis when it has a value, else null with a reason. */
function latencySources(latency: ReturnType<typeof latencyMetrics>) {
  const reason = "no_successful_calls_in_30d";
  const source = (value: number | null) => (value === null ? null : "provider_attempts_30d");
  const avg = source(latency.avg_latency_ms);
  return {
    avg_latency_ms_source: avg,
    ...nullReason("avg_latency_ms_source", avg, reason),
    ...explained("p50_latency_ms_source", source(latency.p50_latency_ms), reason),
    ...explained("p95_latency_ms_source", source(latency.p95_latency_ms), reason),
  };
}

/** The spec's buyer_evidence block; contracts and profiles are the same objects as elsewhere. */
export function buildBuyerEvidence(
  b: Basis,
  parts: {
    providerName: string | null;
    commerce: CommerceContract;
    invocation: InvocationContract;
    exportProfiles: ExportProfiles;
  },
) {
  const { listing, stats, health, reviews } = b.facts;
  const latency = latencyMetrics(b.facts);
  const outputSchema = listing.output_schema;
  return {
    listing_id: listing.id,
    task_aliases: taskAliases(b),
    ...explained("provider_name", parts.providerName, "seller_record_not_found"),
    endpoint_type: b.endpointType,
    price_model: listing.pricing_model,
    // One invocation is charged at most once, on success, whatever the number of provider attempts.
    max_expected_cost_usdc: b.unitPriceUsdc,
    commerce_contract: parts.commerce,
    invocation_contract: parts.invocation,
    auth_requirement: "api_key",
    payment_requirement: b.paymentMode,
    safe_to_retry: listing.safe_to_retry,
    retry_guidance: retryGuidance(b),
    total_invocations: stats.total_invocations,
    success_count: stats.success_count,
    failure_count: stats.failure_count,
    paid_success_count: stats.paid_success_count,
    refunded_paid_count: stats.refunded_paid_count,
    attempts_30d: stats.attempts_30d,
    successful_attempts_30d: stats.successful_attempts_30d,
    ...latency,
    ...latencySources(latency),
    ...uptime7dPct(b.facts),
    ...uptime30dPct(b.facts),
    health_probe_count_7d: health.probe_count_7d,
    health_probe_count_30d: health.probe_count_30d,
    ...explained("latest_health_status", health.latest_status, "no_health_probes_recorded"),
    ...explained("latest_health_probe_at", isoOrNull(health.latest_probe_at), "no_health_probes_recorded"),
    schema_summary: {
      input: summarizeSchema(listing.input_schema),
      ...explained(
        "output",
        outputSchema === null ? null : summarizeSchema(outputSchema),
        "seller_did_not_declare_output_schema",
      ),
    },
    review_count: reviews.review_count,
    verified_review_count: reviews.verified_review_count,
    receipt_linked_review_count: reviews.receipt_linked_review_count,
    ...explained("avg_rating", oneDecimal(reviews.avg_rating), "no_reviews_recorded"),
    ...explained(
      "refund_rate_pct",
      percent(stats.refunded_paid_count, stats.paid_success_count),
      "no_paid_calls_recorded",
    ),
    visibility: visibility(b),
    export_profiles: parts.exportProfiles,
    copy_paste: copyPaste(b, parts.invocation),
  };
}
