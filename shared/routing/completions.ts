import { isWatched } from "../queues.js";
import { isRunningHere } from "./runs-here.js";
import type { InvocationSummary } from "./store/invocations.js";

// Results handed from the executions worker, or from a run in the submitting request (runs-here.ts), to a
// request waiting in the same process (npm start's all-in-one process, or a web process that also runs
// workers). The success statement answers the invocation's summary as it committed it; a request of this
// process waiting on that job takes it instead of reading the row again: one PostgreSQL round trip less
// per execute. A request in another process, or one that finds nothing here, reads the row
// (awaitInvocation): same answer, one read more.

/** An entry nobody took (its request gave up waiting first) is dropped after this long. */
const KEEP_MS = 10_000;

const offered = new Map<string, { at: number; summary: InvocationSummary }>();

/**
 * Offers a committed summary to this process's waiting request, if one waits on the invocation's job.
 * Only for a summary that is final once it commits: free work's statement, and ledger-paid work's
 * transaction, offered after its commit (what else that transaction writes, the capture, its evidence
 * and the day's spend, is not in the summary). x402 work settles after its commit, and its answer reads
 * the row.
 */
export function offerCompletion(summary: InvocationSummary): void {
  if (!isWatched("executions", summary.id) && !isRunningHere(summary.id)) return;
  const now = performance.now();
  for (const [id, entry] of offered) {
    if (now - entry.at < KEEP_MS) break;
    offered.delete(id);
  }
  offered.set(summary.id, { at: now, summary });
}

/** The summary offered for this invocation, once; undefined when none was. */
export function takeCompletion(invocationId: string): InvocationSummary | undefined {
  const entry = offered.get(invocationId);
  if (!entry) return undefined;
  offered.delete(invocationId);
  return entry.summary;
}
