// The sandbox context's public surface: the tumbler, simulated tUSDC credits and sandbox execution on
// the same router, kept in ledger accounts of their own. Depends on audit, outbox, identity, money,
// catalog, routing and x402.

export {
  JoinResult,
  SandboxExecuteBody,
  SandboxMatchQuery,
  SandboxQuote,
  TransitionBody,
  TransitionResult,
} from "./schemas.js";
export { joinTumbler, transitionToProduction } from "./tumbler.js";
export { executeSandboxQuote, quoteSandboxTask } from "./tumbler-execute.js";
