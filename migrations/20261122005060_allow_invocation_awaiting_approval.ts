// Approvals (issue 6): a purchase above its key's approval_above_micros is committed with its hold and
// cap reservation but waits in status awaiting_approval — no job, no provider call — until a supervisor
// approves it (→ queued) or denies it, or it expires (→ failed, hold released).
import type { Knex } from "knex";

const NAME = "invocations_status_check";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.dropChecks([NAME]);
    t.check("status in ('awaiting_approval','queued','running','succeeded','failed')", [], NAME);
  });
}

// Refuses while purchases still await approval: each holds buyer funds that only a decision or the expiry
// sweeper releases with its evidence, so decide or expire them first rather than strand the holds.
export async function down(knex: Knex): Promise<void> {
  const waiting = await knex("invocations").where({ status: "awaiting_approval" }).count({ n: "*" });
  if (Number(waiting[0]?.n ?? 0) > 0) {
    throw new Error("invocations await approval: approve, deny or expire them before rolling back");
  }
  await knex.schema.alterTable("invocations", (t) => {
    t.dropChecks([NAME]);
    t.check("status in ('queued','running','succeeded','failed')", [], NAME);
  });
}
