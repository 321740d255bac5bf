import type { Basis } from "./basis.js";
import { explained } from "./values.js";

/**
 * How the listing can be bought and where it shows: service tier, buying modes, eligibility flags,
 * supply origin and catalog visibility state, all from the shared basis so they match the contracts.
 */

/** free_tool / paid_tool for first-party services, external for sellers. */
export function serviceTier(b: Basis): "free_tool" | "paid_tool" | "external" {
  if (!b.firstParty) return "external";
  return b.requiresPayment ? "paid_tool" : "free_tool";
}

/**
 * catalog_visibility_state: hidden outside the registry, registry_only without search evidence, else
 * the search lane's evidence (runtime proof first, as the lane itself accepts either).
 */
export function catalogVisibilityState(b: Basis): string {
  if (!b.registryVisible) return "hidden";
  if (!b.searchVisible) return "registry_only";
  if (b.facts.listing.last_success_at !== null) return "proven_in_use";
  return b.facts.listing.verification_status ?? "registry_only";
}

/** The buying and supply fields of the read-time table. */
export function supplyFields(b: Basis) {
  // No hosted-agent runtime exists, so hosted_agent_api is never offered and exposure is the marketplace.
  const modes = b.invokable ? ["invoke_service", "procurement_step"] : [];
  return {
    invokable: b.invokable,
    ...(b.invokable ? {} : { invokable_blockers: b.notInvokableReasons }),
    service_tier: serviceTier(b),
    buying_modes: modes,
    // The router (procurement_step) is the recommended entry point: it can fall back, direct invoke cannot.
    ...explained(
      "buying_mode",
      b.invokable ? "procurement_step" : null,
      `listing_not_invokable:${b.notInvokableReasons.join(",")}`,
    ),
    exposure_mode: "marketplace",
    procurement_eligible: b.invokable,
    direct_invoke_eligible: b.invokable,
    // A checkout exists only for paid work; free calls have nothing to check out.
    router_checkout_eligible: b.invokable && b.requiresPayment,
    public_supply_origin: b.facts.listing.public_supply_origin,
    first_party_supply: b.firstParty,
    external_seller_supply: !b.firstParty,
    catalog_visibility_state: catalogVisibilityState(b),
    // No free-trial programme exists on this platform.
    world_agentkit_free_trial_enabled: false,
  };
}
