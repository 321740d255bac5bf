import { randomBytes } from "node:crypto";
import { UnrecoverableError, Worker } from "bullmq";
import { afterAll, beforeAll, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { redriveDeposits } from "../../shared/money/deposits/deposits.js";
import { closeQueues, enqueue, getQueue } from "../../shared/queues.js";
import { createRedis } from "../../shared/redis.js";
import { buildAgent } from "../helpers/factories.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { waitFor } from "../helpers/processes.js";

// The chaos run's lesson (docs/reliability.md "Chaos") applied to deposits: a deposit whose confirmation
// job the queue failed for good (its worker killed twice while holding it) was credited only if its payer
// called verify again. The settlement recovery sweep re-drives it. Own database: the sweep reads every
// open deposit, and other files' jobs live under other prefixes.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;

beforeAll(async () => {
  ownDb = await useOwnDatabase("depredrive");
});

afterAll(async () => {
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await closeQueues();
  await closeDb();
  await ownDb?.drop();
});

async function openDeposit(): Promise<string> {
  const agent = await buildAgent();
  const address = `0x${randomBytes(20).toString("hex")}`;
  const [row] = await db()("deposits")
    .insert({
      agent_id: agent.agentId,
      chain_id: 31337,
      tx_hash: `0x${randomBytes(32).toString("hex")}`,
      sender_address: address,
      platform_address: address,
      token_address: address,
      confirmations_required: 1,
      not_found_deadline_at: db().raw("now() + interval '1 hour'"),
    })
    .returning("id");
  return row.id as string;
}

it("re-drives an open deposit whose confirmation job failed for good or is gone, and leaves live jobs alone", async () => {
  const failed = await openDeposit();
  const gone = await openDeposit();
  const live = await openDeposit();
  const queue = getQueue("settlement-confirmations");
  await enqueue("settlement-confirmations", failed, { deposit_id: failed });
  const bare = new Worker(
    "settlement-confirmations",
    async () => {
      throw new UnrecoverableError("job stalled more than allowable limit");
    },
    { connection: createRedis("worker"), prefix: getConfig().queuePrefix },
  );
  try {
    await waitFor("the job to fail", async () => (await queue.getJobState(failed)) === "failed");
  } finally {
    await bare.close();
  }
  await enqueue("settlement-confirmations", live, { deposit_id: live });

  // Young deposits are left to their own job.
  expect(await redriveDeposits()).toBe(0);
  await db()("deposits")
    .whereIn("id", [failed, gone, live])
    .update({ updated_at: db().raw("now() - interval '1 minute'") });
  expect(await redriveDeposits()).toBe(2);
  for (const id of [failed, gone, live]) expect(await queue.getJobState(id)).toBe("waiting");
  expect(await redriveDeposits()).toBe(0);
});
