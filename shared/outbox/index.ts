// The outbox context's public surface: jobs recorded in the same transaction as the rows they act on
// (job_outbox), enqueued after commit and re-sent by the sweeper when Redis was down. Depends on no context.

export type { Housekeeping } from "./outbox.js";
export { flushJobMarks, markJobSent, startSweeper } from "./outbox.js";
