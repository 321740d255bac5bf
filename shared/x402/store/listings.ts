import { type ListingRow, listingColumns, withoutUnavailableTools } from "../../catalog/index.js";
import type { Db } from "../../db/knex.js";

/**
 * Listings the x402 edge sells: the registry lane (active, approved, not verification-failed) with a
 * positive price, newest changes first; and how many there are.
 */
export async function listPayableListings(
  q: Db,
  page: { limit: number; offset: number },
): Promise<{ rows: ListingRow[]; total: number }> {
  const filter = (b: ReturnType<Db>) =>
    withoutUnavailableTools(b)
      .where("listings.status", "active")
      .where("review_status", "approved")
      .whereRaw("verification_status is distinct from 'failed'")
      .where("price_micros", ">", 0);
  const [rows, count] = await Promise.all([
    filter(q("listings").select(listingColumns(q)))
      .orderBy([{ column: "listings.updated_at", order: "desc" }, { column: "listings.id" }])
      .limit(page.limit)
      .offset(page.offset),
    filter(q("listings")).count({ n: "*" }).first(),
  ]);
  return { rows: rows as ListingRow[], total: Number(count?.n ?? 0) };
}
