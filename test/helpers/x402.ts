import { randomBytes } from "node:crypto";
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import type { PaymentPayload, PaymentRequired } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import type { Address, Hex } from "viem";
import { ERC20_ABI } from "../../shared/chain/client.js";
import { db } from "../../shared/db/knex.js";
import { challengeNonce, parseWwwAuthenticate } from "../../shared/x402/mpp.js";
import { type LocalChain, type LocalWallet, signTransferAuthorization } from "./chain.js";

// An x402 buyer as the outside world builds one: the official @x402/fetch client with @x402/evm's exact
// scheme over a viem local account funded with the local chain's test USDC, and an MPP credential built
// by hand (draft-evm-charge "authorization": EIP-3009 with nonce = keccak256(challenge.id ‖ realm)).

export interface X402Buyer {
  wallet: LocalWallet;
  client: x402Client;
  /** fetch that answers a 402 by signing and retrying once (wrapFetchWithPayment). */
  pay: typeof fetch;
}

/** A buyer wallet holding `usdcMicros` of test USDC, with an x402 client allowed to spend it. */
export async function x402Buyer(chain: LocalChain, usdcMicros: bigint): Promise<X402Buyer> {
  const wallet = await chain.newWallet({ usdcMicros });
  const client = new x402Client().register("eip155:*", new ExactEvmScheme(wallet.account));
  // Non-default tokens are refused by the client's spend controls unless listed (notes: local chain).
  client.setSpendControls({
    allowedAssets: [{ network: `eip155:${chain.chainId}`, asset: chain.tokenAddress }],
  });
  return { wallet, client, pay: wrapFetchWithPayment(fetch, client) };
}

export async function usdcBalance(chain: LocalChain, address: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.tokenAddress,
    abi: ERC20_ABI,
    functionName: "balanceOf",
    args: [address],
  });
}

/** The PaymentRequired of a 402 (x402 v2 header). */
export function paymentRequiredOf(res: { headers: Headers }): PaymentRequired {
  const header = res.headers.get("payment-required");
  if (!header) throw new Error("no PAYMENT-REQUIRED header");
  return decodePaymentRequiredHeader(header);
}

/** A signed x402 v2 payload for a 402, made by the official client; `edit` may tamper with it. */
export async function signedPayload(buyer: X402Buyer, required: PaymentRequired): Promise<PaymentPayload> {
  return buyer.client.createPaymentPayload(required);
}

export const encodePayload = (p: PaymentPayload) => encodePaymentSignatureHeader(p);

/** An MPP credential answering a WWW-Authenticate: Payment challenge, as `Authorization` value. */
export async function mppAuthorization(
  chain: LocalChain,
  wallet: LocalWallet,
  wwwAuthenticate: string,
  opts: { nonce?: Hex; validBefore?: bigint } = {},
): Promise<string> {
  const challenge = parseWwwAuthenticate(wwwAuthenticate);
  if (!challenge) throw new Error(`not a Payment challenge: ${wwwAuthenticate}`);
  const request = JSON.parse(Buffer.from(challenge.request, "base64url").toString("utf8"));
  const { authorization, signature } = await signTransferAuthorization({
    account: wallet.account,
    token: { address: request.currency, chainId: request.methodDetails.chainId },
    to: request.recipient,
    valueMicros: BigInt(request.amount),
    validBefore: opts.validBefore ?? BigInt(Math.floor(Date.now() / 1000) + 300),
    nonce: opts.nonce ?? challengeNonce(challenge.id, challenge.realm),
  });
  const credential = {
    challenge,
    source: `did:pkh:eip155:${chain.chainId}:${wallet.address}`,
    payload: {
      type: "authorization",
      from: authorization.from,
      to: authorization.to,
      value: authorization.value.toString(),
      validAfter: authorization.validAfter.toString(),
      validBefore: authorization.validBefore.toString(),
      nonce: authorization.nonce,
      signature,
    },
  };
  return `Payment ${Buffer.from(JSON.stringify(credential)).toString("base64url")}`;
}

/** Rows of every table an x402 request may write: a refused payment must leave all of them unchanged. */
export async function x402RowCounts(): Promise<Record<string, number>> {
  const tables = [
    "invocations",
    "invocation_attempts",
    "receipts",
    "job_outbox",
    "x402_payments",
    "payment_evidence",
    "chain_transactions",
    "ledger_transactions",
  ];
  const counts: Record<string, number> = {};
  for (const t of tables) {
    const [row] = await db()(t).count({ n: "*" });
    counts[t] = Number(row!.n);
  }
  const [used] = await db()("quotes").whereNotNull("used_at").count({ n: "*" });
  counts.quotes_used = Number(used!.n);
  return counts;
}

export const randomTask = () => `x402-${randomBytes(4).toString("hex")}`;
