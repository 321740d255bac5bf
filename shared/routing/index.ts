// The routing context's public surface: match and ranking, submitting executions and direct invokes,
// running an invocation with fallback (the executions worker hosts run-invocation.ts), provider calls
// signed with the platform key, per-listing limits, health probes and circuit breakers, idempotency,
// approvals of held purchases, status and receipt views, and the quotes the paid edges record.
// Owns invocations, invocation_attempts, receipts, idempotency_keys, approvals, platform_signing_keys,
// quotes. Depends on audit, outbox, identity, money and catalog.
//
// The x402 edge settles its own invocations: it sits above, so it plugs in as an EdgeSettlement.

export {
  approvePurchase,
  awaitingApprovalResult,
  denyPendingOfRevokedKey,
  denyPurchase,
  listApprovalsFor,
  readApproval,
} from "./approvals/approvals.js";
export { startApprovalExpiry } from "./approvals/expiry.js";
export { circuitStateCounts, openCircuits } from "./circuits.js";
export { probeHeaderName } from "./health-probe.js";
export { purgeExpiredIdempotencyKeys } from "./idempotency.js";
export {
  executeResult,
  invocationStatus,
  isTerminal,
  pendingResult,
  receiptView,
} from "./invocation-view.js";
export { matchProviders } from "./match.js";
export { holdForInvocation } from "./paid-invocations.js";
export { processHealthProbe, processProbeSweep, scheduleProbeSweep } from "./probe-sweep.js";
export { createQuote, quoteNotUsable, quoteView, readQuote } from "./quotes.js";
export { ABANDONED_BY_QUEUE, scheduleOrphanRecovery } from "./recovery.js";
export {
  activeSigningKey,
  publishedJwks,
  RETIRED_KEY_PUBLISH_DAYS,
  signMessage,
  verifyPlatformCall,
} from "./request-signing.js";
export { candidateView, rankCandidates, readTaskListings } from "./router.js";
export type { EdgeSettlement } from "./run-invocation.js";
export { failInvocation, RunInProgress, runInvocation } from "./run-invocation.js";
export type { Runner } from "./runs-here.js";
export { runExecutionsHere } from "./runs-here.js";
export {
  ApprovalDecisionBody,
  ApprovalList,
  ApprovalParams,
  ApprovalQuery,
  ApprovalView,
  ExecuteAwaitingApproval,
} from "./schemas/approvals.js";
export {
  ExecuteBody,
  ExecutePending,
  ExecuteResult,
  IdempotencyKey,
  InvocationStatus,
  InvokeBody,
  MatchQuery,
  MatchResult,
  QuoteBody,
  QuoteCreated,
  QuoteParams,
  QuoteView,
  Receipt,
  TusdcAmount,
} from "./schemas/execute.js";
export { assertNotOnlyOwnListings, assertNotOwnListing } from "./self-dealing.js";
export type {
  InvocationError,
  InvocationRow,
  InvocationSummary,
  NewInvocation,
  RunClaim,
} from "./store/invocations.js";
export { findInvocation, insertInvocationWithJob, listAttempts, TERMINAL } from "./store/invocations.js";
export type { QuoteRow } from "./store/quotes.js";
export { deleteStaleQuotes, findQuote, insertQuote, useQuote } from "./store/quotes.js";
export { findReceiptForInvocation } from "./store/receipts.js";
export type { Submission } from "./submission.js";
export { awaitInvocation, dispatchExecution, submitExecution, submitInvoke } from "./submission.js";
