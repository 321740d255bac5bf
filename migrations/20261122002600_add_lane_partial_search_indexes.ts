// Catalog search always filters by lane, so its text indexes are partial, one set per lane, with the
// lane's predicate written exactly as shared/catalog/store/listings.ts laneFilter writes it (the planner must be
// able to prove the match). The search lane (~a quarter of listings at scale) then reads only its own
// rows. The whole-table text indexes from …2200 serve no query any more and are dropped.
import type { Knex } from "knex";

const REGISTRY =
  "listings.status = 'active' and listings.review_status = 'approved' and listings.verification_status is distinct from 'failed'";
const SEARCH = `${REGISTRY} and (listings.verification_status in ('verified', 'reachable') or listings.last_success_at is not null)`;

export async function up(knex: Knex): Promise<void> {
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
  await knex.raw("drop index if exists listings_search_vector_idx");
  await knex.raw("drop index if exists listings_name_trgm_idx");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("create index listings_search_vector_idx on listings using gin (search_vector)");
  await knex.raw("create index listings_name_trgm_idx on listings using gin (lower(name) gin_trgm_ops)");
  for (const name of [
    "listings_search_name_trgm_idx",
    "listings_registry_name_trgm_idx",
    "listings_search_vector_lane_idx",
    "listings_registry_vector_idx",
  ]) {
    await knex.raw(`drop index if exists ${name}`);
  }
}
