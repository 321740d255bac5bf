import type { ListingFacts } from "../listing-facts.js";
import { explained, nullReason, oneDecimal, percent } from "./values.js";

/** Why an uptime over a window is null: no probes in it, or none ever. */
function uptimeReason(facts: ListingFacts, window: "7d" | "30d"): string {
  if (facts.health.probe_count_30d === 0) return "no_health_probes_recorded";
  return `no_health_probes_in_${window}`;
}

/** Health-probe uptime over the last 7 days, in percent (null without probes). */
export function uptime7dPct(facts: ListingFacts) {
  const { probe_success_7d, probe_count_7d } = facts.health;
  return explained("uptime_7d_pct", percent(probe_success_7d, probe_count_7d), uptimeReason(facts, "7d"));
}

/** Health-probe uptime over the last 30 days, in percent (null without probes). */
export function uptime30dPct(facts: ListingFacts) {
  const { probe_success_30d, probe_count_30d } = facts.health;
  return explained("uptime_30d_pct", percent(probe_success_30d, probe_count_30d), uptimeReason(facts, "30d"));
}

/** Latency metrics of succeeded provider attempts in the last 30 days, each with its null reason. */
export function latencyMetrics(facts: ListingFacts) {
  const reason = "no_successful_calls_in_30d";
  const avg = oneDecimal(facts.stats.avg_latency_ms);
  return {
    avg_latency_ms: avg,
    ...nullReason("avg_latency_ms", avg, reason),
    ...explained("p50_latency_ms", facts.stats.p50_latency_ms, reason),
    ...explained("p95_latency_ms", facts.stats.p95_latency_ms, reason),
  };
}

/**
 * The spec's telemetry block. success_rate_pct is successful/all provider attempts in the last 30 days;
 * uptime comes only from health probes. `null_reason` summarises: null when every metric has data.
 */
export function buildTelemetry(facts: ListingFacts) {
  const { stats, health } = facts;
  const successRatePct = percent(stats.successful_attempts_30d, stats.attempts_30d);
  const uptime = uptime30dPct(facts);
  const { p50_latency_ms, p95_latency_ms } = facts.stats;
  const metrics = [successRatePct, uptime.uptime_30d_pct, p50_latency_ms, p95_latency_ms];
  const nullCount = metrics.filter((m) => m === null).length;
  return {
    success_rate_pct: successRatePct,
    ...nullReason("success_rate_pct", successRatePct, "no_attempts_in_30d"),
    success_rate_basis: "provider_attempts_30d" as const,
    attempts_30d: stats.attempts_30d,
    successful_attempts_30d: stats.successful_attempts_30d,
    ...uptime,
    ...explained("p50_latency_ms", p50_latency_ms, "no_successful_calls_in_30d"),
    ...explained("p95_latency_ms", p95_latency_ms, "no_successful_calls_in_30d"),
    health_probe_count_30d: health.probe_count_30d,
    null_reason:
      nullCount === 0
        ? null
        : nullCount === metrics.length
          ? "no_calls_or_health_probes_in_30d"
          : "partial_data_see_metric_null_reasons",
  };
}

export type Telemetry = ReturnType<typeof buildTelemetry>;
