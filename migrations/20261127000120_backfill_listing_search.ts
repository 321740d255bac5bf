// Fills listing_search (…0100) for the listings that existed before its trigger (…0110): a no-op
// update would fire the trigger per row; one insert … select with the same predicate is cheaper.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    insert into listing_search (listing_id, search_vector, name_lower, category, tool_id, seller_id,
                                search_lane, featured, created_at)
    select id, search_vector, lower(name), category, tool_id, seller_id,
           coalesce(verification_status in ('verified', 'reachable'), false) or last_success_at is not null,
           featured, created_at
      from listings
     where status = 'active' and review_status = 'approved' and verification_status is distinct from 'failed'
    on conflict (listing_id) do nothing`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("delete from listing_search");
}
