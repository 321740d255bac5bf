import type { ListingRow } from "../catalog/index.js";
import { AppError } from "../errors.js";
import type { Principal } from "../identity/index.js";
import type { Ranking } from "./router.js";

// Self-dealing (docs/routing.md "Self-dealing"): an agent buying its own listing would inflate the
// invocation counts, success rates and ranking other buyers rely on, so it is refused. The ranking leaves
// the buyer's own listings out (own_listing, router.ts); these are the refusals around it.

function selfDealing(details: { task?: string; listing_id?: string }): AppError {
  return new AppError("SELF_DEALING_FORBIDDEN", "an agent cannot buy its own listing", {
    ...details,
    reason: "own_listing",
    why: "calls to one's own listing would inflate its invocation counts, success rate and ranking",
  });
}

/** A call locked to one listing (invoke, a sandbox quote): refused when the caller sells it. */
export function assertNotOwnListing(principal: Principal, listing: ListingRow): void {
  if (listing.seller_id === principal.agentId) throw selfDealing({ listing_id: listing.id });
}

/** A ranking with nothing eligible because only the caller's own listings answer: refused as such. */
export function assertNotOnlyOwnListings(task: string, ranking: Ranking): void {
  const { eligible, excluded } = ranking;
  if (eligible.length === 0 && excluded.length > 0 && excluded.every((e) => e.reason === "own_listing"))
    throw selfDealing({ task });
}
