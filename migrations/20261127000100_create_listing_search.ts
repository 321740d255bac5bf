// Catalog search at 100k listings: a broad word ("time", "data") matches ~25,000 registry listings, and
// an exact total plus ts_rank ordering must visit every match. On the wide listings table (≈1.1 kB a
// row, jsonb schemas and descriptions) that is one heap page per match, ~12,000 pages, most of them
// outside shared buffers. This narrow copy holds only what matching, lane filtering and ordering read
// (≈0.5 kB a row) and only registry-lane listings (the widest lane: active, approved, not failed), so
// count and rank read about half the pages; the page of results is then read from listings by id.
// Kept in sync by a trigger on listings (…0110); docs/catalog.md "Search rows" explains it.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create table listing_search (
      listing_id uuid primary key references listings (id) on delete cascade,
      search_vector tsvector not null,
      name_lower text not null,
      category text not null,
      tool_id text,
      seller_id uuid,
      search_lane boolean not null,
      featured boolean not null,
      created_at timestamptz not null
    )`);
  await knex.raw("create index listing_search_vector_idx on listing_search using gin (search_vector)");
  await knex.raw(
    "create index listing_search_lane_vector_idx on listing_search using gin (search_vector) where search_lane",
  );
  await knex.raw(
    "create index listing_search_name_trgm_idx on listing_search using gin (name_lower gin_trgm_ops)",
  );
  await knex.raw(
    "create index listing_search_lane_name_trgm_idx on listing_search using gin (name_lower gin_trgm_ops) where search_lane",
  );
  await knex.raw("create index listing_search_category_idx on listing_search (category)");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop table listing_search");
}
