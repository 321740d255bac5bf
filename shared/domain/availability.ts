import type { PaidGate } from "./listing-facts.js";

/**
 * The paid-execution gate (DESIGN §5), computed afresh on every call. Paid authority needs a settlement
 * rail: a reachable chain, a configured signer and custody not frozen. This release configures no rail
 * (the money issue adds it), so custody is frozen and the platform is read-only for paid work, exactly
 * the fresh-install state the spec observes. Free execution, discovery and reads are unaffected.
 */
export function paidGate(): PaidGate {
  return { enabled: false, reason: "platform_custody_frozen" };
}

/** Routes that answer without payment and without a key: safe to call in any availability state. */
export const SAFE_DISCOVERY_ENDPOINTS = [
  "/market.json",
  "/api/capabilities",
  "/api/capabilities/{id}",
  "/api/tools/echo",
  "/api/health",
  "/api/stats",
  "/api/quickstart",
  "/openapi.json",
  "/openapi.yaml",
] as const;

/** Where a person starts: how to register, the catalog, and the API description. */
export const HUMAN_ENTRY_PATHS = ["/api/quickstart", "/market.json", "/openapi.yaml"] as const;

/** The spec's availability block, as of now. */
export function availability() {
  const gate = paidGate();
  return gate.enabled
    ? {
        status: "available",
        paid_execution: "enabled",
        reason: null,
        reason_null_reason: "paid_execution_enabled",
        intent: "paid_and_free_execution",
        scope: "platform",
        completion_target: null,
        completion_target_null_reason: "nothing_pending",
        architecture_state: "settlement_rail_live",
        message: "Paid and free execution are available.",
        safe_discovery_endpoints: [...SAFE_DISCOVERY_ENDPOINTS],
        human_entry_paths: [...HUMAN_ENTRY_PATHS],
        custody: { status: "active", authoritative: true, authority_read_ok: true },
      }
    : {
        status: "read_only",
        paid_execution: "temporarily_unavailable",
        reason: gate.reason,
        intent: "protect_buyer_funds_until_settlement_is_live",
        scope: "paid_execution",
        completion_target: null,
        completion_target_null_reason: "no_settlement_rail_configured",
        architecture_state: "settlement_rail_not_configured",
        message:
          "Paid execution is temporarily unavailable: do not call paid routes, sign payments, send funds or retry paid " +
          "calls. Discovery, catalog, health, proof routes and free execution (task 'echo') remain available.",
        safe_discovery_endpoints: [...SAFE_DISCOVERY_ENDPOINTS],
        human_entry_paths: [...HUMAN_ENTRY_PATHS],
        custody: { status: "frozen", authoritative: true, authority_read_ok: true },
      };
}

/** The funding block of marketplace_info: funding follows the gate. */
export function funding() {
  const gate = paidGate();
  return gate.enabled
    ? { status: "available", reason: null }
    : { status: "temporarily_unavailable", reason: gate.reason };
}
