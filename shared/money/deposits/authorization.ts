import { randomBytes } from "node:crypto";
import { authorizationTypes } from "@x402/evm";
import {
  type Address,
  BaseError,
  type Hex,
  HttpRequestError,
  isAddressEqual,
  parseSignature,
  recoverTypedDataAddress,
  serializeSignature,
  TimeoutError,
  verifyTypedData,
} from "viem";
import { EIP3009_ABI, ERC20_ABI, platformAddress, publicClient } from "../../chain/client.js";
import { type ContractWrite, type SendOptions, sendOnce } from "../../chain/durable-tx.js";
import { authorizationUsed, USDC_EIP712 } from "../../chain/eip3009.js";
import { rpcErrorSummary } from "../../chain/rpc-error.js";
import { findChainTx } from "../../chain/transactions-store.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { AppError } from "../../errors.js";
import { formatUsdc } from "../../kernel/money.js";
import { logger } from "../../log.js";
import { assertPaidExecutionEnabled } from "../gate/availability.js";
import { findOpenLink } from "../wallets/store.js";
import {
  type DepositVerification,
  purchaseInstructions,
  queueConfirmation,
  recordDepositClaim,
} from "./deposits.js";
import {
  countOpenDepositRequests,
  type DepositRequestRow,
  deleteStaleDepositRequests,
  findAgentDepositRequest,
  insertDepositRequest,
} from "./store/requests.js";

// Gasless deposits (docs/payments.md "Wallet and deposits"). Instead of sending an ERC-20 transfer and paying its
// gas, the depositor signs an EIP-3009 TransferWithAuthorization the server chose and stored — from the
// linked wallet to the platform address, the amount, a validity window, a random nonce — and the
// platform submits it through durable-tx, paying the gas. The transaction is claimed as an ordinary
// deposit (deposits.ts) before it is broadcast, so the settlement-confirmations worker confirms and
// credits it exactly as it does a transfer: once.

/** durable-tx purpose: one platform transaction per deposit request. */
export const DEPOSIT_AUTHORIZATION_PURPOSE = "deposit_authorization";
/** How long the depositor has to sign and authorize (the authorization's validBefore is now + this). */
export const AUTHORIZATION_TTL_SECONDS = 3600;
/** An authorization with less time than this left is not submitted: it could expire before it is mined. */
export const MIN_REMAINING_SECONDS = 30n;
/** Unexpired, unsubmitted requests one agent may hold at once (each is a stored row). */
export const MAX_OPEN_DEPOSIT_REQUESTS = 20;

const EIP712_DOMAIN_TYPE = [
  { name: "name", type: "string" },
  { name: "version", type: "string" },
  { name: "chainId", type: "uint256" },
  { name: "verifyingContract", type: "address" },
];

const nowSeconds = () => BigInt(Math.floor(Date.now() / 1000));

/** The EIP-712 typed data of a request, exactly as it is checked and as the token checks it. */
function typedData(r: DepositRequestRow) {
  return {
    domain: { ...USDC_EIP712, chainId: r.chain_id, verifyingContract: r.token_address as Address },
    types: authorizationTypes,
    primaryType: "TransferWithAuthorization" as const,
    message: {
      from: r.from_address as Address,
      to: r.to_address as Address,
      value: r.amount_micros,
      validAfter: r.valid_after,
      validBefore: r.valid_before,
      nonce: r.nonce as Hex,
    },
  };
}

/** The same typed data for the wire (eth_signTypedData_v4): integers as decimal strings. */
function wireTypedData(r: DepositRequestRow) {
  const { domain, types, primaryType, message } = typedData(r);
  return {
    domain,
    // Wallets hash the domain with the EIP712Domain type they are given, so it is spelled out.
    types: { EIP712Domain: EIP712_DOMAIN_TYPE, ...types },
    primaryType,
    message: {
      ...message,
      value: message.value.toString(),
      validAfter: message.validAfter.toString(),
      validBefore: message.validBefore.toString(),
    },
  };
}

/**
 * POST /api/wallet/purchase: the transfer to send (method "transfer", nothing recorded), or a stored
 * EIP-3009 authorization to sign (method "authorization"). 503 while paid execution is off, before
 * anything else; WALLET_NOT_LINKED without a linked wallet.
 */
export async function requestDeposit(
  agentId: string,
  body: { amount_usdc: string | number; method?: "transfer" | "authorization" },
  requestId: string,
) {
  const base = await purchaseInstructions(agentId, body.amount_usdc);
  if ((body.method ?? "transfer") === "transfer") return { ...base, method: "transfer" as const };
  const q = db();
  if (
    (await countOpenDepositRequests(q, agentId, DEPOSIT_AUTHORIZATION_PURPOSE)) >= MAX_OPEN_DEPOSIT_REQUESTS
  ) {
    throw new AppError("RATE_LIMITED", "too many open deposit requests; authorize one or let them expire", {
      open_deposit_requests: MAX_OPEN_DEPOSIT_REQUESTS,
      retry_after_seconds: 60,
    });
  }
  await deleteStaleDepositRequests(q, agentId, DEPOSIT_AUTHORIZATION_PURPOSE);
  const t = base.transfer;
  const request = await insertDepositRequest(q, {
    agent_id: agentId,
    chain_id: t.chain_id,
    token_address: t.token_address,
    from_address: t.from_address,
    to_address: t.to_address,
    amount_micros: BigInt(base.amount_atomic),
    valid_after: 0n,
    valid_before: nowSeconds() + BigInt(AUTHORIZATION_TTL_SECONDS),
    nonce: `0x${randomBytes(32).toString("hex")}`,
    request_id: requestId,
  });
  const url = `${getConfig().publicBaseUrl}/api/wallet/purchase/authorize`;
  const expiresAt = new Date(Number(request.valid_before) * 1000).toISOString();
  return {
    ...base,
    method: "authorization" as const,
    status: "awaiting_signature" as const,
    transfer: {
      ...t,
      method:
        "EIP-3009 transferWithAuthorization(from_address → to_address, amount_atomic) on token_address, " +
        "signed by from_address and submitted by the platform",
    },
    authorization: {
      deposit_request_id: request.id,
      expires_at: expiresAt,
      typed_data: wireTypedData(request),
      signing: {
        method: "eth_signTypedData_v4",
        standard: "EIP-712 typed data of EIP-3009 TransferWithAuthorization",
        sign: "typed_data exactly as given, with the key of from_address; integers are decimal strings",
        gas: "the platform submits the transfer and pays its gas: from_address needs the USDC and no ETH",
        single_use: "a request transfers at most once; the token also accepts each nonce once",
        supported_wallets:
          "externally owned accounts; smart-contract wallets (EIP-1271) are not supported yet",
      },
    },
    rules: [
      "Sign with the linked wallet (from_address): the signature is checked against this exact message.",
      "The platform submits the transfer and pays its gas; from_address needs amount_usdc in USDC, no ETH.",
      `Authorize before expires_at (${expiresAt}); after that, ask for a new request.`,
      `The deposit is credited once it has ${base.confirmations_required} confirmation(s); authorizing the same request again returns the same deposit.`,
    ],
    next: {
      method: "POST" as const,
      path: "/api/wallet/purchase/authorize",
      url,
      body: { deposit_request_id: request.id, signature: "0x… (65-byte EIP-712 signature of typed_data)" },
    },
  };
}

function refused(code: "CONFLICT" | "PAYMENT_REQUIRED", message: string, details: Record<string, unknown>) {
  return new AppError(code, message, {
    ...details,
    new_request: 'POST /api/wallet/purchase {amount_usdc, method: "authorization"}',
  });
}

function rpcUnavailable(err: unknown): AppError {
  return new AppError(
    "SERVICE_UNAVAILABLE",
    "the settlement chain could not be reached; nothing was submitted",
    {
      reason: "settlement_rpc_unreachable",
      rpc_error: rpcErrorSummary(err).error,
    },
  );
}

/** A chain read for a request being answered: an RPC failure is a 503, not a 500. */
async function chainRead<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    throw err instanceof BaseError ? rpcUnavailable(err) : err;
  }
}

/** The signature in the 65-byte, v = 27/28 form the token's ECRecover takes, if it proves the request. */
async function checkedSignature(r: DepositRequestRow, raw: Hex): Promise<Hex> {
  let signature: Hex | undefined;
  try {
    signature = serializeSignature(parseSignature(raw));
  } catch {
    signature = undefined;
  }
  const data = typedData(r);
  const address = r.from_address as Address;
  if (signature && (await verifyTypedData({ ...data, address, signature }).catch(() => false))) {
    return signature;
  }
  throw new AppError(
    "WALLET_SIGNATURE_INVALID",
    "the signature is not the linked wallet's signature of this request",
    {
      expected_signer: address,
      recovered_signer: signature
        ? await recoverTypedDataAddress({ ...data, signature }).catch(() => null)
        : null,
      signing_method: "eth_signTypedData_v4 (EIP-712) over authorization.typed_data, exactly as returned",
      smart_contract_wallets: "not supported yet (EIP-1271)",
    },
  );
}

/** Refuses a request that can no longer be submitted as signed (nothing is recorded). */
async function assertSubmittable(agentId: string, r: DepositRequestRow): Promise<void> {
  const config = getConfig();
  const to = platformAddress();
  if (
    r.chain_id !== config.chainId ||
    !isAddressEqual(r.token_address as Address, config.usdcAddress) ||
    !to ||
    !isAddressEqual(r.to_address as Address, to)
  ) {
    throw refused("CONFLICT", "the deposit rail changed since this request was made", {
      reason: "deposit_request_rail_changed",
    });
  }
  if (nowSeconds() + MIN_REMAINING_SECONDS >= r.valid_before) {
    throw refused("CONFLICT", "this deposit request has expired", {
      reason: "deposit_request_expired",
      expired_at: new Date(Number(r.valid_before) * 1000).toISOString(),
    });
  }
  const link = await findOpenLink(db(), agentId);
  if (link?.address !== r.from_address) {
    throw refused("CONFLICT", "the linked wallet changed since this request was made", {
      reason: "linked_wallet_changed",
      request_from_address: r.from_address,
      linked_address: link?.address ?? null,
    });
  }
  if (await chainRead(() => authorizationUsed(r.token_address, r.from_address, r.nonce))) {
    // Our own concurrent authorize of this request may have just used it: sendOnce then finds its row.
    if (await findChainTx(db(), DEPOSIT_AUTHORIZATION_PURPOSE, r.id)) return;
    throw alreadyUsed();
  }
}

function alreadyUsed(): AppError {
  return refused("CONFLICT", "the token has already used or cancelled this authorization's nonce", {
    reason: "authorization_already_used",
    if_you_submitted_it: "claim that transaction with POST /api/wallet/purchase/verify {tx_hash}",
  });
}

/** Why the token would not take the transfer (gas estimation failed before anything was stored). */
async function refusal(err: unknown, r: DepositRequestRow): Promise<unknown> {
  if (!(err instanceof BaseError)) return err;
  if (err.walk((e) => e instanceof HttpRequestError || e instanceof TimeoutError)) return rpcUnavailable(err);
  const [balance, used] = await chainRead(() =>
    Promise.all([
      publicClient().readContract({
        address: r.token_address as Address,
        abi: ERC20_ABI,
        functionName: "balanceOf",
        args: [r.from_address as Address],
      }),
      authorizationUsed(r.token_address, r.from_address, r.nonce),
    ]),
  );
  if (balance < r.amount_micros) {
    return refused("PAYMENT_REQUIRED", "the wallet does not hold the USDC this deposit transfers", {
      reason: "insufficient_usdc_balance",
      wallet: r.from_address,
      balance_usdc: formatUsdc(balance),
      required_usdc: formatUsdc(r.amount_micros),
      retry: "add USDC to the wallet, then authorize the same request again before it expires",
    });
  }
  if (used) return alreadyUsed();
  return refused("PAYMENT_REQUIRED", "the token refused this authorization", {
    reason: "authorization_would_revert",
    revert: rpcErrorSummary(err).error,
  });
}

function transferCall(r: DepositRequestRow, signature: Hex): ContractWrite {
  const m = typedData(r).message;
  return {
    address: r.token_address as Address,
    abi: EIP3009_ABI,
    functionName: "transferWithAuthorization",
    args: [m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, signature],
  };
}

/**
 * POST /api/wallet/purchase/authorize: checks the signature against the stored request, submits the
 * transfer through durable-tx (the platform pays the gas; one transaction per request), claims the
 * deposit before broadcasting and queues its confirmation. Authorizing again returns the same deposit.
 * Refused with nothing recorded: another agent's request (404), a bad signature (400), an expired or
 * used request (409), a wallet without the USDC (402).
 */
export async function authorizeDeposit(
  agentId: string,
  body: { deposit_request_id: string; signature: string },
  requestId: string,
  options: SendOptions = {},
): Promise<DepositVerification> {
  await assertPaidExecutionEnabled();
  const request = await findAgentDepositRequest(db(), agentId, body.deposit_request_id);
  if (!request) throw new AppError("NOT_FOUND", "no such deposit request");
  const signature = await checkedSignature(request, body.signature as Hex);
  if (!(await findChainTx(db(), DEPOSIT_AUTHORIZATION_PURPOSE, request.id))) {
    await assertSubmittable(agentId, request);
  }
  let claimed: DepositVerification | undefined;
  const claim = async (txHash: Hex, submittedBy: string): Promise<DepositVerification> => {
    claimed ??= await recordDepositClaim(agentId, {
      txHash,
      sender: request.from_address,
      platform: request.to_address,
      requestId,
      authorization: {
        depositRequestId: request.id,
        amountMicros: request.amount_micros,
        details: {
          standard: "EIP-3009 transferWithAuthorization",
          ...wireTypedData(request).message,
          signature,
          submitted_by: submittedBy,
        },
      },
    });
    return claimed;
  };
  const tx = await sendOnce(DEPOSIT_AUTHORIZATION_PURPOSE, request.id, transferCall(request, signature), {
    // The deposit exists before the transaction can: a crash after broadcasting cannot lose the claim.
    beforeBroadcast: async (row) => {
      await claim(row.tx_hash, row.from_address);
      await options.beforeBroadcast?.(row);
    },
  }).catch(async (err: unknown) => {
    const recorded = await findChainTx(db(), DEPOSIT_AUTHORIZATION_PURPOSE, request.id);
    if (!recorded) throw await refusal(err, request);
    // Signed and recorded, but the broadcast failed: the confirmation worker broadcasts it again.
    logger().warn(
      { ...rpcErrorSummary(err), deposit_request_id: request.id, tx_hash: recorded.tx_hash },
      "gasless deposit recorded but not broadcast; the confirmation worker will retry",
    );
    return recorded;
  });
  const result = claimed ?? (await claim(tx.tx_hash, tx.from_address));
  const { deposit } = result;
  if (deposit.status === "pending" || deposit.status === "confirming") {
    await queueConfirmation(deposit.id, result.created);
  }
  return result;
}
