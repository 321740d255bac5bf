import type { Basis } from "./basis.js";
import { unique } from "./values.js";

/**
 * Readiness checks of a listing. Each check is a list of blockers (what is missing, by name); a check
 * passes exactly when its list is empty, so a `ready_*` flag can always be explained.
 */

/** The blocker lists behind each readiness flag; export profiles reuse them. */
export function readinessChecks(b: Basis) {
  const { listing } = b.facts;
  const search = unique([
    ...b.registryBlockers,
    ...(b.registryVisible && !b.searchVisible ? ["no_runtime_proof_or_verification"] : []),
  ]);
  const match = unique([...b.notInvokableReasons, ...(b.inputSchemaDeclared ? [] : ["no_input_schema"])]);
  const autonomous = unique([
    ...match,
    ...search,
    ...(b.outputSchemaDeclared ? [] : ["no_output_schema"]),
    ...(b.reviewRiskFlags.length > 0 ? [`risk_flags_require_review:${b.reviewRiskFlags.join(",")}`] : []),
  ]);
  const paidAutonomous = b.requiresPayment ? autonomous : ["not_a_paid_listing"];
  const x402Export = unique([
    ...(b.requiresPayment ? [] : ["no_x402_price"]),
    ...(b.paidBlocker ? [b.paidBlocker] : []),
    ...autonomous,
  ]);
  const externalMarketplaceExport = unique([
    ...autonomous,
    ...(listing.long_description.trim() ? [] : ["no_long_description"]),
    ...(listing.data_retention.trim() ? [] : ["no_data_retention_declared"]),
    ...(listing.allowed_use.trim() ? [] : ["no_allowed_use_declared"]),
  ]);
  return { search, match, autonomous, paidAutonomous, x402Export, externalMarketplaceExport };
}

export type ReadinessChecks = ReturnType<typeof readinessChecks>;

/** Non-blocking gaps a buyer or operator should know about. */
function warningsOf(b: Basis): string[] {
  const { listing, stats, health, reviews } = b.facts;
  const warnings: string[] = [];
  if (!listing.safe_to_retry) warnings.push("not_safe_to_retry");
  if (listing.verification_status === null) warnings.push("never_verified");
  if (stats.attempts_30d === 0) warnings.push("no_attempts_in_30d");
  if (health.probe_count_30d === 0) warnings.push("no_health_probes_recorded");
  if (reviews.review_count === 0) warnings.push("no_reviews_recorded");
  if (listing.tags.length === 0) warnings.push("no_tags");
  if (!listing.long_description.trim()) warnings.push("no_long_description");
  if (!listing.allowed_use.trim()) warnings.push("no_allowed_use_declared");
  if (listing.required_scopes.length > 0)
    warnings.push(`scopes_required:${listing.required_scopes.join(",")}`);
  if (!b.requiresPayment) warnings.push("free_listing_not_exportable_to_x402");
  return warnings;
}

/** The spec's completeness block: ready_* booleans, blockers, warnings and the *_declared flags. */
export function buildCompleteness(b: Basis, checks: ReadinessChecks) {
  const { listing } = b.facts;
  return {
    ready_for_search_discovery: checks.search.length === 0,
    ready_for_match_ranking: checks.match.length === 0,
    ready_for_autonomous_invocation: checks.autonomous.length === 0,
    ready_for_paid_autonomous_invocation: checks.paidAutonomous.length === 0,
    ready_for_x402_export: checks.x402Export.length === 0,
    ready_for_external_marketplace_export: checks.externalMarketplaceExport.length === 0,
    // Blockers of discovery and invocation; export-only gaps stay in blockers_by_check and export_profiles.
    blockers: unique([...checks.search, ...checks.match, ...checks.autonomous]),
    blockers_by_check: {
      ready_for_search_discovery: checks.search,
      ready_for_match_ranking: checks.match,
      ready_for_autonomous_invocation: checks.autonomous,
      ready_for_paid_autonomous_invocation: checks.paidAutonomous,
      ready_for_x402_export: checks.x402Export,
      ready_for_external_marketplace_export: checks.externalMarketplaceExport,
    },
    warnings: warningsOf(b),
    input_schema_declared: b.inputSchemaDeclared,
    output_schema_declared: b.outputSchemaDeclared,
    data_retention_declared: listing.data_retention.trim() !== "",
    allowed_use_declared: listing.allowed_use.trim() !== "",
    long_description_declared: listing.long_description.trim() !== "",
    tags_declared: listing.tags.length > 0,
  };
}

export type Completeness = ReturnType<typeof buildCompleteness>;
