// A catalog page without search words (the default GET /api/capabilities, /market.json, the machine
// catalogs) is a whole lane, or a category of it, in the order featured, then oldest, with its exact
// count. Ranked and sorted like a search, the registry lane's 93,000 rows at 100k listings took ~50 ms.
// The order as a btree (whole, search lane, per category) makes the page a walk that stops after it, and
// a narrow btree of what the lane filters read (search_lane, category, tool_id) makes the count an
// index-only scan (shared/catalog/store/listing-search.ts browse). The per-category order replaces the
// plain category index, which it serves as well.
import type { Knex } from "knex";

const INDEXES: [name: string, definition: string][] = [
  ["listing_search_order_idx", "(featured desc, created_at, listing_id)"],
  ["listing_search_lane_order_idx", "(featured desc, created_at, listing_id) where search_lane"],
  ["listing_search_category_order_idx", "(category, featured desc, created_at, listing_id)"],
  ["listing_search_count_idx", "(search_lane, category, tool_id)"],
];

export async function up(knex: Knex): Promise<void> {
  for (const [name, definition] of INDEXES)
    await knex.raw(`create index ${name} on listing_search ${definition}`);
}

export async function down(knex: Knex): Promise<void> {
  for (const [name] of INDEXES) await knex.raw(`drop index if exists ${name}`);
}
