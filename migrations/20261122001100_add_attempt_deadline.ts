// An attempt's deadline is when its call must have ended (the call's timeout plus a margin). Until then
// the attempt is live: a second delivery of the same job waits instead of calling the provider again.
// After it, a 'running' attempt belongs to a dead worker and may be closed as abandoned.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocation_attempts", (t) => {
    t.timestamp("deadline_at", { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocation_attempts", (t) => {
    t.dropColumn("deadline_at");
  });
}
