// listing_search (…0100) must never disagree with listings, whoever writes them: the catalog store,
// health probes (verification_status), the execute path's first success (last_success_at), seed
// migrations, tests. A row trigger keeps it in the writer's transaction. The update trigger fires only
// when a column the copy depends on changes; last_success_at matters only as null / not null, so the
// execute path's once-a-minute refresh of it evaluates the WHEN clause and nothing else.
import type { Knex } from "knex";

const WATCHED = (row: "old" | "new") =>
  `(${row}.status, ${row}.review_status, ${row}.verification_status, ${row}.last_success_at is null,
    ${row}.featured, ${row}.category, ${row}.tool_id, ${row}.seller_id, ${row}.created_at, ${row}.name,
    ${row}.search_vector)`;

export async function up(knex: Knex): Promise<void> {
  // The registry-lane predicate and the search-lane flag mirror laneFilter in
  // shared/catalog/store/listings.ts (spec "Discovery visibility lanes").
  await knex.raw(`
    create function sync_listing_search() returns trigger language plpgsql as $$
    begin
      if new.status = 'active' and new.review_status = 'approved'
         and new.verification_status is distinct from 'failed' then
        insert into listing_search (listing_id, search_vector, name_lower, category, tool_id, seller_id,
                                    search_lane, featured, created_at)
        values (new.id, new.search_vector, lower(new.name), new.category, new.tool_id, new.seller_id,
                coalesce(new.verification_status in ('verified', 'reachable'), false)
                  or new.last_success_at is not null,
                new.featured, new.created_at)
        on conflict (listing_id) do update set
          search_vector = excluded.search_vector, name_lower = excluded.name_lower,
          category = excluded.category, tool_id = excluded.tool_id, seller_id = excluded.seller_id,
          search_lane = excluded.search_lane, featured = excluded.featured, created_at = excluded.created_at;
      else
        delete from listing_search where listing_id = new.id;
      end if;
      return null;
    end $$`);
  await knex.raw(`
    create trigger listings_search_insert after insert on listings
      for each row execute function sync_listing_search()`);
  await knex.raw(`
    create trigger listings_search_update after update on listings
      for each row when (${WATCHED("old")} is distinct from ${WATCHED("new")})
      execute function sync_listing_search()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop trigger listings_search_update on listings");
  await knex.raw("drop trigger listings_search_insert on listings");
  await knex.raw("drop function sync_listing_search()");
}
