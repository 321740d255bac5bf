import { randomBytes } from "node:crypto";
import {
  type Account,
  type Address,
  type Chain,
  createWalletClient,
  type Hex,
  http,
  type LocalAccount,
  type Transport,
  type WalletClient,
} from "viem";
import type { LocalChain } from "../../shared/chain/local-chain.js";

export {
  LOCAL_CHAIN_ID,
  type LocalChain,
  type LocalWallet,
  startLocalChain,
} from "../../shared/chain/local-chain.js";

/** A wallet client that sends as `account` to the local chain over its HTTP RPC URL. */
export function localWalletClient(
  chain: LocalChain,
  account: LocalAccount,
): WalletClient<Transport, Chain, Account> {
  // retryCount 0: on loopback a failure is real, and retrying only slows a failing test down.
  return createWalletClient({
    account,
    chain: chain.publicClient.chain!,
    transport: http(chain.rpcUrl, { retryCount: 0 }),
    pollingInterval: 50,
  });
}

/** The EIP-3009 message a payer signs, with the field names and types of the token's typehash. */
export interface TransferAuthorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

export const RECEIVE_WITH_AUTHORIZATION_TYPES = {
  ReceiveWithAuthorization: TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization,
} as const;

export interface SignTransferAuthorizationParams {
  account: LocalAccount;
  token: { address: Address; chainId: number };
  to: Address;
  valueMicros: bigint;
  /** Unix seconds; default 0 (valid at once). */
  validAfter?: bigint;
  /** Unix seconds; default one hour from the wall clock. */
  validBefore?: bigint;
  /** Default: 32 random bytes. */
  nonce?: Hex;
  /** ReceiveWithAuthorization signs a different primary type; default "transfer". */
  kind?: "transfer" | "receive";
}

/** Signs an EIP-3009 authorization for the test token (domain "USD Coin", version "2"). */
export async function signTransferAuthorization(
  params: SignTransferAuthorizationParams,
): Promise<{ authorization: TransferAuthorization; signature: Hex }> {
  const authorization: TransferAuthorization = {
    from: params.account.address,
    to: params.to,
    value: params.valueMicros,
    validAfter: params.validAfter ?? 0n,
    validBefore: params.validBefore ?? BigInt(Math.floor(Date.now() / 1000) + 3600),
    nonce: params.nonce ?? `0x${randomBytes(32).toString("hex")}`,
  };
  const domain = {
    name: "USD Coin",
    version: "2",
    chainId: params.token.chainId,
    verifyingContract: params.token.address,
  } as const;
  const signature =
    params.kind === "receive"
      ? await params.account.signTypedData({
          domain,
          types: RECEIVE_WITH_AUTHORIZATION_TYPES,
          primaryType: "ReceiveWithAuthorization",
          message: authorization,
        })
      : await params.account.signTypedData({
          domain,
          types: TRANSFER_WITH_AUTHORIZATION_TYPES,
          primaryType: "TransferWithAuthorization",
          message: authorization,
        });
  return { authorization, signature };
}
