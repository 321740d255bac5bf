import type { Address, Hex } from "viem";
import { EIP3009_ABI, publicClient } from "./client.js";

// EIP-3009 (transferWithAuthorization) facts shared by the x402 gateway and gasless deposits: both
// accept a USDC authorization the payer signed, so both need the token's EIP-712 domain and its nonce
// state. They live with the chain access, below every bounded context.

/** The EIP-712 domain of USDC (and of our TestUSDC): the `extra` every exact-EVM requirement carries. */
export const USDC_EIP712 = { name: "USD Coin", version: "2" } as const;

/** True when the token has already consumed (or the payer cancelled) this EIP-3009 nonce. */
export async function authorizationUsed(asset: string, from: string, nonce: string): Promise<boolean> {
  return publicClient().readContract({
    address: asset as Address,
    abi: EIP3009_ABI,
    functionName: "authorizationState",
    args: [from as Address, nonce as Hex],
  });
}
