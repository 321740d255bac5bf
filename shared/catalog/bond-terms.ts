import { formatUsdc } from "../kernel/money.js";

// The seller bond's numbers and its published terms (spec "Limits": one free concurrent listing slot,
// a $1 USDC bond for further live supply, downgrade after 30 days of good standing). Kept apart from the
// publishing and bond modules so both can read them without importing each other.

/** One free concurrent live listing per third-party seller (spec "Limits"). */
export const FREE_LISTING_SLOTS = 1;
/** The bond for further live listings: $1 USDC. */
export const BOND_MICROS = 1_000_000n;
/** What stays bonded after a downgrade: half; the other half returns to the seller's available balance. */
export const DOWNGRADED_BOND_MICROS = 500_000n;
/** The bond must be this old, and the seller in good standing over this window, before a downgrade. */
export const GOOD_STANDING_DAYS = 30;
/** Good standing allows at most this share of the window's paid calls to have failed (and been refunded). */
export const MAX_REFUND_RATE_PERCENT = 10;

export const BOND_TERMS = {
  bond_usdc: formatUsdc(BOND_MICROS),
  covers: "every live listing beyond the one free slot, however many, while the bond is open",
  downgrade: `after ${GOOD_STANDING_DAYS} days of good standing, POST /api/stake/downgrade returns ${formatUsdc(
    BOND_MICROS - DOWNGRADED_BOND_MICROS,
  )} USDC; ${formatUsdc(DOWNGRADED_BOND_MICROS)} stays bonded and the seller keeps its bonded status`,
  good_standing: `none of your live listings is verification_status failed, and at most ${MAX_REFUND_RATE_PERCENT}% of the paid calls to your listings in the last ${GOOD_STANDING_DAYS} days failed and were refunded`,
  release:
    "POST /api/stake/release returns what is bonded, only once no paid listing of yours is live and no more listings are live than the free slot",
  post_with: "POST /api/stake",
  availability: "posting a bond is a paid route: read GET /market.json availability first",
};
