// GET /api/x402/discover pages the listings the x402 edge sells (the registry lane with a positive
// price, newest changes first) and counts them (shared/x402/store/listings.ts). At 100k listings both
// read the wide listings table whole: ~55 ms to sort for one page, ~65 ms to count. Partial indexes on
// exactly that set make the page a walk that stops after it and the count an index-only scan. Their
// predicate is the query's, written the same way, so the planner can prove it.
import type { Knex } from "knex";

const PAYABLE = `status = 'active' and review_status = 'approved'
  and verification_status is distinct from 'failed' and price_micros > 0`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    `create index listings_payable_order_idx on listings (updated_at desc, id) where ${PAYABLE}`,
  );
  await knex.raw(`create index listings_payable_tool_idx on listings (tool_id) where ${PAYABLE}`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop index if exists listings_payable_tool_idx");
  await knex.raw("drop index if exists listings_payable_order_idx");
}
