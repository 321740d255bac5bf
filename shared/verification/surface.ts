import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { logger } from "../log.js";
import { PLATFORM_FEE_RATE, paidGate } from "../money/index.js";
import { activeSigningKey, RETIRED_KEY_PUBLISH_DAYS } from "../routing/index.js";
import { countRows } from "./store/orders.js";
import {
  MAX_ACHIEVABLE_VERDICT,
  PROBER_VERSION,
  PROTOCOLS,
  surfaceSchemaName,
  VERDICTS,
  VERIFICATION_PRICE_MICROS,
} from "./terms.js";

export const VERIFICATION_ROUTES = {
  surface: "GET /api/verification",
  create_order: "POST /api/verification/orders",
  read_order: "GET /api/verification/orders/{order_id}",
  rerun_order: "POST /api/verification/orders/{order_id}/rerun",
  read_attestation: "GET /api/verification/attestations/{attestation_id}",
  verify_attestation: "POST /api/verification/attestations/verify",
  create_monitoring: "POST /api/verification/orders/{order_id}/monitoring",
  cancel_monitoring: "POST /api/verification/monitoring/{subscription_id}/cancel",
  jwks: "GET /.well-known/jwks.json",
} as const;

/** GET /api/verification: the surface descriptor (interface-spec "Verification records"), live. */
export async function verificationSurface() {
  const config = getConfig();
  const [counts, gate] = await Promise.all([countRows(db()), paidGate()]);
  let activeKid: string | null = null;
  try {
    activeKid = (await activeSigningKey()).kid;
  } catch (err) {
    logger().warn({ err }, "no signing key for the verification surface");
  }
  return {
    schema: surfaceSchemaName(),
    description:
      "Paid, deterministic, read-only probes of an endpoint you name (http-json, x402, mcp), each answered with an " +
      "Ed25519-signed attestation anyone can verify against our JWKS. It sells testing, not trust: an order never " +
      "changes a listing, its verification status, ranking or trust state.",
    routes: { ...VERIFICATION_ROUTES },
    pricing: {
      price_usdc: Number(VERIFICATION_PRICE_MICROS) / 1e6,
      platform_fee_rate: PLATFORM_FEE_RATE,
      money_note:
        "5 USDC per order, per rerun and per monitoring run, each a separate charge from your prepaid balance: held " +
        "when ordered, captured when the probe ran (whatever the verdict), released in full when it could not run " +
        "through our fault. The platform is the seller: all of it goes to platform revenue (the ledger shows the " +
        "97/3 split as two revenue legs). The target endpoint is never paid.",
    },
    supported_protocols: [...PROTOCOLS],
    max_achievable_verdict: { ...MAX_ACHIEVABLE_VERDICT },
    verdict_vocabulary: [...VERDICTS],
    prober_version: PROBER_VERSION,
    counts: {
      orders: counts.orders,
      attestations: counts.attestations,
      monitoring_subscriptions: counts.subscriptions,
    },
    signing_enabled: activeKid !== null,
    signing_key_source: config.platformSigningKey
      ? "platform_signing_key_env"
      : "database_platform_signing_keys",
    signed_attestations_required: true,
    signing: {
      algorithm: "EdDSA" as const,
      curve: "Ed25519" as const,
      jwks_url: `${config.publicBaseUrl}/.well-known/jwks.json`,
      active_kid: activeKid,
      attestation_ttl_seconds: config.attestationTtlSeconds,
      retired_key_publish_days: RETIRED_KEY_PUBLISH_DAYS,
      payload: "JWS compact serialization; payload = JCS (RFC 8785) bytes of the attestation",
    },
    monitoring_scheduler_enabled: config.verificationMonitoringScheduler,
    monitoring_min_interval_seconds: config.verificationMinIntervalSeconds,
    paid_execution: { enabled: gate.enabled, reason: gate.reason },
    safety: {
      sells_testing_not_trust: true as const,
      paid_order_cannot_change_verdict: true as const,
      spend_on_target_endpoint: false as const,
      marketplace_trust_state_mutated: false as const,
      router_ranking_mutated: false as const,
      listings_mutated: false as const,
      outbound_fetch_boundary:
        "shared/net/safe-fetch.ts (public addresses only, every hop re-checked, time and size caps)",
      outbound_fetches_use_safe_fetch: true as const,
      credentials_sent_to_target: false as const,
      x402_challenges_paid: false as const,
      mcp_tools_called: false as const,
    },
  };
}
