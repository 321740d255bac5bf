// BullMQ cannot join a PostgreSQL transaction. Jobs are written here in the same transaction as the
// rows they act on; the API enqueues after commit and marks the row sent, and the sweeper re-enqueues
// rows left unsent (Redis down, process killed between commit and enqueue). Job ids are row ids, so a
// second enqueue of the same job is harmless.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("job_outbox", (t) => {
    t.bigIncrements("id");
    t.text("queue").notNullable();
    t.text("job_id").notNullable();
    t.jsonb("payload").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("enqueued_at", { useTz: true });
    t.unique(["queue", "job_id"]);
  });
  await knex.raw("create index job_outbox_unsent_idx on job_outbox (created_at) where enqueued_at is null");
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("job_outbox");
}
