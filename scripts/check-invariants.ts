// `npm run check:invariants`: checks the money and execution invariants (docs/reliability.md
// "Invariants") against the database at DATABASE_URL and, when REDIS_URL is set, the executions queue
// (QUEUE_PREFIX). Read-only: it writes nothing, so an operator may run it against production.
//
//   npm run check:invariants [-- --grace-seconds N]   (open invocations younger than N s, default 60,
//                                                      may be in flight: between commit and enqueue, or
//                                                      run in the submitting process)
//
// Prints one line per violation and a summary; exits 0 when every invariant holds, 1 when any is
// broken, 2 when it could not check (no database, bad configuration).
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { getConfig } from "../shared/config.js";
import { closeDb, db } from "../shared/db/knex.js";
import { closeQueues, getQueue } from "../shared/queues.js";
import { checkInvariants, LIVE_JOB_GRACE_SECONDS } from "../shared/system/index.js";

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { "grace-seconds": { type: "string" } } });
  const graceSeconds = Number(values["grace-seconds"] ?? LIVE_JOB_GRACE_SECONDS);
  if (!Number.isFinite(graceSeconds) || graceSeconds < 0)
    throw new Error("--grace-seconds takes a number ≥ 0");
  const useRedis = Boolean(getConfig().redisUrl);
  const report = await checkInvariants(db(), {
    executions: useRedis ? getQueue("executions") : undefined,
    graceSeconds,
  });
  for (const v of report.violations) console.log(`VIOLATION ${v.check}: ${v.subject}: ${v.detail}`);
  for (const c of report.checks)
    console.log(`${c.violations === 0 ? "ok  " : "FAIL"} ${c.name} (${c.violations})`);
  if (!useRedis) console.log("skipped open_invocation_has_live_job: REDIS_URL is not set");
  console.log(`${report.checks.length} invariants checked, ${report.violations.length} violations`);
  return report.violations.length === 0 ? 0 : 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main()
    .catch((error: unknown) => {
      console.error(`could not check: ${(error as Error).message}`);
      return 2;
    })
    .then(async (code) => {
      await closeQueues().catch(() => {});
      await closeDb().catch(() => {});
      process.exit(code);
    });
}
