// The money context's public surface: the double-entry ledger and its evidence rows, the paid-execution
// gate and custody freeze, wallets and wallet links, deposits (tx hash and gasless EIP-3009), payouts, the
// chain descriptor. Owns ledger_*, payment_evidence, platform_settings, wallet_*, deposits,
// deposit_requests, payouts. Depends on audit and outbox.
//
// Amounts are bigint micro-USDC (shared/kernel/money.ts); every movement goes through ledger/ledger.ts.

export { chainDescriptor, LOCAL_CHAIN_ID, PLATFORM_FEE_RATE } from "./chain-descriptor.js";
export type { PayoutRetryAction } from "./console/console.js";
export {
  evidenceView,
  failedOrStuckDeposits,
  failedOrStuckPayouts,
  recheckDeposit,
  redriveJob,
  retryPayout,
} from "./console/console.js";
export type { CountByState, LedgerTotal } from "./console/store.js";
export { depositCountsByStatus, ledgerTotalsByKind, payoutCountsByStatus } from "./console/store.js";
export { authorizeDeposit, requestDeposit } from "./deposits/authorization.js";
export type { DepositOutcome } from "./deposits/confirmation.js";
export { confirmDeposit } from "./deposits/confirmation.js";
export type { DepositVerification } from "./deposits/deposits.js";
export {
  depositAnswer,
  depositStatus,
  MAX_PURCHASE_MICROS,
  MIN_PURCHASE_MICROS,
  redriveDeposits,
  verifyDeposit,
} from "./deposits/deposits.js";
export type { EvidenceRow, NewEvidence, PostEvidence } from "./evidence/store.js";
export { appendEvidence, listEvidence, THIS_TRANSACTION } from "./evidence/store.js";
export type { GateReading, PaidGate } from "./gate/availability.js";
export {
  assertCustodyOpen,
  assertPaidExecutionEnabled,
  availability,
  funding,
  isCustodyFrozenRefusal,
  paidGate,
  paidGateProvedByHold,
  readGate,
} from "./gate/availability.js";
export { custodyStatus, setCustody } from "./gate/custody.js";
export type {
  AgentMovement,
  CaptureResult,
  CaptureSplit,
  HoldOutcome,
} from "./ledger/flows.js";
export {
  captureHold,
  holdAndResolveTogether,
  holdFunds,
  postBond,
  recordX402Settlement,
  releaseBond,
  releaseHold,
  topUpFromFaucet,
} from "./ledger/flows.js";
export type { Currency, HeldFunds } from "./ledger/ledger.js";
export { balances, PLATFORM_FEE_PERCENT, platformSplit, retryTransient } from "./ledger/ledger.js";
export type { PayoutConfirmationOutcome } from "./payouts/confirmation.js";
export { confirmPayout } from "./payouts/confirmation.js";
export { payoutSummary, processPayoutSweep } from "./payouts/payouts.js";
export type { PayoutSubmissionOutcome } from "./payouts/submission.js";
export { processPayout } from "./payouts/submission.js";
export { DevChainInfo, FaucetBody, FaucetResult } from "./schemas/dev-chain.js";
export { BondBlock, PayoutSummary, StakeBody, StakeView } from "./schemas/seller-money.js";
export {
  AuthorizeBody,
  ChainDescriptor,
  ConnectBody,
  ConnectChallenge,
  ConnectLinked,
  DepositWithEvidence,
  GeneratedWallet,
  Pricing,
  PurchaseBody,
  PurchaseInstructions,
  VerifyBody,
  VerifyResult,
  WalletView,
} from "./schemas/wallet.js";
export { devChainInfo, devFaucet } from "./wallets/dev-faucet.js";
export { connectWallet } from "./wallets/link.js";
export { generateSelfCustodyWallet, walletView } from "./wallets/wallet.js";
