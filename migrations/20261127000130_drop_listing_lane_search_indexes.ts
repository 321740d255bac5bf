// Catalog search now matches and ranks over listing_search (…0100), which has its own text indexes;
// the per-lane partial indexes on listings (…2600) serve no query any more and cost every listing write.
import type { Knex } from "knex";

const REGISTRY =
  "listings.status = 'active' and listings.review_status = 'approved' and listings.verification_status is distinct from 'failed'";
const SEARCH = `${REGISTRY} and (listings.verification_status in ('verified', 'reachable') or listings.last_success_at is not null)`;

export async function up(knex: Knex): Promise<void> {
  for (const name of [
    "listings_search_name_trgm_idx",
    "listings_registry_name_trgm_idx",
    "listings_search_vector_lane_idx",
    "listings_registry_vector_idx",
  ]) {
    await knex.raw(`drop index if exists ${name}`);
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    `create index listings_registry_vector_idx on listings using gin (search_vector) where ${REGISTRY}`,
  );
  await knex.raw(
    `create index listings_search_vector_lane_idx on listings using gin (search_vector) where ${SEARCH}`,
  );
  await knex.raw(
    `create index listings_registry_name_trgm_idx on listings using gin (lower(name) gin_trgm_ops) where ${REGISTRY}`,
  );
  await knex.raw(
    `create index listings_search_name_trgm_idx on listings using gin (lower(name) gin_trgm_ops) where ${SEARCH}`,
  );
}
