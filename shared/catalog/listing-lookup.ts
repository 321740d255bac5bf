import { db } from "../db/knex.js";
import { AppError } from "../errors.js";
import { isUuid } from "../kernel/ids.js";
import { findListing, type ListingRow } from "./store/listings.js";

/** A listing by id (retired ones too), or 404 LISTING_NOT_FOUND with where to look instead. */
export async function requireListing(id: string, hint = "GET /api/capabilities"): Promise<ListingRow> {
  const listing = isUuid(id) ? await findListing(db(), id) : undefined;
  if (!listing) throw new AppError("LISTING_NOT_FOUND", "no listing with this id", { listing_id: id, hint });
  return listing;
}
