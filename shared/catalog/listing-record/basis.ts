import { formatUsdc, micros } from "../../kernel/money.js";
import type { ListingFacts } from "../listing-facts.js";
import { exampleInput } from "./schema-examples.js";
import { unique } from "./values.js";

/**
 * The derived facts every block of the listing record shares (price, lanes, invokability, paths), so
 * the commerce contract, the invocation contract, completeness and buyer evidence can never disagree.
 */

/**
 * Provider calls the router makes for one invocation when the listing is safe_to_retry: the one source
 * of the number, which the listing record advertises and shared/routing/run-invocation.ts enforces.
 */
export const ROUTER_MAX_ATTEMPTS = 3;

/**
 * The platform's cap on any provider call (shared/routing/provider-call.ts MAX_PROVIDER_LATENCY_MS, kept
 * equal by a unit test); not imported so this pure module loads no network code.
 */
export const PLATFORM_MAX_LATENCY_MS = 30_000;

/** Default of IDEMPOTENCY_RETENTION_HOURS (docs/api.md "Idempotency"); callers pass the configured value. */
export const DEFAULT_IDEMPOTENCY_RETENTION_HOURS = 24;

/** CAIP-2 id of the spec's settlement network (chain id 8453), when the caller names none. */
export const SETTLEMENT_NETWORK = "eip155:8453";

/** settlement_rail of paid listings: x402 `exact` USDC transfers on Base (DESIGN §6). */
export const PAID_SETTLEMENT_RAIL = "x402_usdc_base";

/** Days without a call after which a listing stops being `active`, then stops being `idle`. */
export const ACTIVE_MAX_DAYS = 7;
export const IDLE_MAX_DAYS = 30;

export type PublicTier = "featured" | "search" | "registry" | "hidden";
export type PaymentMode = "free" | "x402_usdc" | "paid_execution_unavailable";

export interface BuildOptions {
  /** IDEMPOTENCY_RETENTION_HOURS as configured; the record states it, so it must be the real value. */
  idempotencyRetentionHours?: number;
  /** CAIP-2 id of the configured settlement chain (CHAIN_ID): pricing.network states it. */
  settlementNetwork?: string;
}

export interface Basis {
  facts: ListingFacts;
  idempotencyRetentionHours: number;
  settlementNetwork: string;
  priceMicros: bigint;
  unitPriceUsdc: string;
  requiresPayment: boolean;
  /** The gate's reason when the listing is paid and the gate is closed, else null. */
  paidUnavailableReason: string | null;
  /** "paid_execution_unavailable:<reason>" when the listing is paid and the gate is closed, else null. */
  paidBlocker: string | null;
  paymentMode: PaymentMode;
  firstParty: boolean;
  endpointType: "platform_hosted" | "relay_hosted";
  /** Why the listing is outside the registry lane (empty when inside). */
  registryBlockers: string[];
  registryVisible: boolean;
  searchVisible: boolean;
  featuredCandidate: boolean;
  publicTier: PublicTier;
  /** Why the platform would refuse a call right now (empty when invokable). */
  notInvokableReasons: string[];
  invokable: boolean;
  inputSchemaDeclared: boolean;
  outputSchemaDeclared: boolean;
  /** Risk flags that need policy or human review before an autonomous call (all declared flags). */
  reviewRiskFlags: string[];
  paths: {
    match: string;
    execute: string;
    directInvoke: string;
    status: string;
    x402Invoke: string;
    x402Discover: string;
  };
  exampleInput: { value: Record<string, unknown>; placeholder: boolean };
}

/**
 * Registry lane blockers, the same rules as the catalog's lanes (laneRows in
 * shared/catalog/store/listing-search.ts, the listing_search sync trigger): active, review approved,
 * verification not failed.
 */
function registryBlockersOf(facts: ListingFacts): string[] {
  const { listing } = facts;
  const blockers: string[] = [];
  if (listing.status !== "active") blockers.push(`listing_${listing.status}`);
  if (listing.review_status !== "approved")
    blockers.push(`review_status_not_approved:${listing.review_status}`);
  if (listing.verification_status === "failed") blockers.push("verification_failed");
  return blockers;
}

/** Computes the shared derivations once per record. */
export function deriveBasis(facts: ListingFacts, options: BuildOptions = {}): Basis {
  const { listing, paidGate } = facts;
  const priceMicros = micros(listing.price_micros);
  const requiresPayment = priceMicros > 0n;
  const paidUnavailableReason =
    requiresPayment && !paidGate.enabled ? (paidGate.reason ?? "reason_not_reported") : null;
  const paidBlocker = paidUnavailableReason ? `paid_execution_unavailable:${paidUnavailableReason}` : null;
  const registryBlockers = registryBlockersOf(facts);
  const registryVisible = registryBlockers.length === 0;
  // Search lane: registry plus a verdict (verified/reachable) or runtime proof (a successful call).
  const searchVisible =
    registryVisible &&
    (listing.verification_status === "verified" ||
      listing.verification_status === "reachable" ||
      listing.last_success_at !== null);
  const featuredCandidate = searchVisible && listing.featured;
  const notInvokableReasons = unique([...registryBlockers, ...(paidBlocker ? [paidBlocker] : [])]);
  const id = encodeURIComponent(listing.id);
  const example = exampleInput(listing.input_schema);
  return {
    facts,
    idempotencyRetentionHours: options.idempotencyRetentionHours ?? DEFAULT_IDEMPOTENCY_RETENTION_HOURS,
    settlementNetwork: options.settlementNetwork ?? SETTLEMENT_NETWORK,
    priceMicros,
    unitPriceUsdc: formatUsdc(priceMicros),
    requiresPayment,
    paidUnavailableReason,
    paidBlocker,
    paymentMode: !requiresPayment ? "free" : paidBlocker ? "paid_execution_unavailable" : "x402_usdc",
    firstParty: listing.public_supply_origin === "first_party_service",
    // Where a call actually goes: a stored path is served by the platform itself (resolveEndpoint).
    endpointType: listing.endpoint_url.startsWith("/") ? "platform_hosted" : "relay_hosted",
    registryBlockers,
    registryVisible,
    searchVisible,
    featuredCandidate,
    publicTier: featuredCandidate
      ? "featured"
      : searchVisible
        ? "search"
        : registryVisible
          ? "registry"
          : "hidden",
    notInvokableReasons,
    invokable: notInvokableReasons.length === 0,
    inputSchemaDeclared: Object.keys(listing.input_schema ?? {}).length > 0,
    outputSchemaDeclared: listing.output_schema !== null && Object.keys(listing.output_schema).length > 0,
    // There is no platform risk taxonomy yet, so every seller-declared flag is treated as needing review.
    reviewRiskFlags: [...listing.risk_flags],
    paths: {
      match: `/api/execute/match?task=${encodeURIComponent(listing.slug)}`,
      execute: "/api/execute",
      directInvoke: `/api/invoke/${id}`,
      status: "/api/execute/status/{invocation_id}",
      x402Invoke: `/api/x402/invoke/${id}`,
      x402Discover: `/api/x402/invoke/${id}/discover`,
    },
    exampleInput: example as Basis["exampleInput"],
  };
}
