import type { PaidGate } from "../money/index.js";
import type { ListingRow } from "./store/listings.js";

/**
 * Everything the public listing record is computed from (shared/catalog/listing-record/). Gathered by
 * shared/catalog/catalog.ts in a few batched queries per page; the record builder is a pure function of
 * these facts (no clock: the read's time enters as daysSinceLastInvoke), so every value it shows can be
 * traced to a row, and a missing fact becomes null with a `*_null_reason` instead of a guess.
 */
export interface ListingStats {
  /** Invocations routed to the listing, by outcome (queued/running ones count only in total). */
  total_invocations: number;
  success_count: number;
  failure_count: number;
  /** Succeeded invocations with a positive price (paid); refunds have no table yet, so 0 is exact. */
  paid_success_count: number;
  refunded_paid_count: number;
  /** Latency of succeeded provider attempts over the last 30 days; null when there were none. */
  avg_latency_ms: number | null;
  p50_latency_ms: number | null;
  p95_latency_ms: number | null;
  /** Attempts in the last 30 days (any outcome) and how many succeeded: the success-rate basis. */
  attempts_30d: number;
  successful_attempts_30d: number;
  last_invoked_at: Date | null;
  last_paid_success_at: Date | null;
}

/** From health probes (readHealthFacts): 7/30-day counts over UTC days, today included; latest probe. */
export interface HealthFacts {
  probe_count_7d: number;
  probe_success_7d: number;
  probe_count_30d: number;
  probe_success_30d: number;
  latest_status: "healthy" | "unhealthy" | null;
  latest_probe_at: Date | null;
}

/** Reviews have no table yet: counts are 0 (exact) and the average is null. */
export interface ReviewFacts {
  review_count: number;
  verified_review_count: number;
  receipt_linked_review_count: number;
  avg_rating: number | null;
}

export interface SellerFacts {
  id: string;
  name: string;
  created_at: Date;
}

export interface ListingFacts {
  listing: ListingRow;
  /** null for first-party listings (the platform is the seller). */
  seller: SellerFacts | null;
  stats: ListingStats;
  health: HealthFacts;
  reviews: ReviewFacts;
  paidGate: PaidGate;
  platformId: string;
  /** Absolute base of links, without a trailing slash. */
  baseUrl: string;
  /**
   * Whole days (floor) from the read to stats.last_invoked_at, never negative; null when never invoked
   * (wholeDaysSince in shared/kernel/days.ts). The record's one dependence on the clock, made a fact so
   * that the record is a function of its facts alone and a kept record's facts prove it current
   * (record-cache.ts).
   */
  daysSinceLastInvoke: number | null;
}

/** A listing never invoked: every counter 0, every latency unknown. */
export const NO_STATS: ListingStats = {
  total_invocations: 0,
  success_count: 0,
  failure_count: 0,
  paid_success_count: 0,
  refunded_paid_count: 0,
  avg_latency_ms: null,
  p50_latency_ms: null,
  p95_latency_ms: null,
  attempts_30d: 0,
  successful_attempts_30d: 0,
  last_invoked_at: null,
  last_paid_success_at: null,
};

export const NO_HEALTH: HealthFacts = {
  probe_count_7d: 0,
  probe_success_7d: 0,
  probe_count_30d: 0,
  probe_success_30d: 0,
  latest_status: null,
  latest_probe_at: null,
};

export const NO_REVIEWS: ReviewFacts = {
  review_count: 0,
  verified_review_count: 0,
  receipt_linked_review_count: 0,
  avg_rating: null,
};
