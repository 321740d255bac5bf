// The open invocations (queued or running) indexed by id: what the executions recovery sweep and the
// invariants' open-invocation check read (shared/routing/recovery.ts, shared/system/invariants). Without
// it, each of the sweep's passes (every 30 s in every executions process) was a scan of the history that
// grew with every call ever made: 100–107 ms at 333,000 invocations on a 2-core machine, against 0.1 ms
// through this index, which holds what is open and, until vacuum removes them, the entries of what
// ended since (docs/benchmarks.md "The sixteenth round").
//
// The price, measured there: every claim adds an entry (vacuum removes it once the invocation ends), and
// the outcome's update changes a column of the index's predicate, so it is never a HOT update (it was for
// ~18 % of executes, where the page had room): ~0.1 KB more WAL an execute, no rate or latency change a
// paired A/B resolved.
//
// Built CONCURRENTLY, outside a transaction: a deployment's invocations table is large, and a plain
// CREATE INDEX would block every execute's writes while it reads the table. A build that fails leaves an
// invalid index behind; running the migration again drops it first.
import type { Knex } from "knex";

export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw("drop index concurrently if exists invocations_open_idx");
  await knex.raw(
    "create index concurrently invocations_open_idx on invocations (id) where status in ('queued', 'running')",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop index concurrently if exists invocations_open_idx");
}
