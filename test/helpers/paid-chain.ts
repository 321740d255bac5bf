import { getAddress, type Hex, type PrivateKeyAccount, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { overrideConfig } from "../../shared/config.js";
import { resetGateCache } from "../../shared/money/gate/availability.js";
import type { LocalChain } from "./chain.js";

export interface PaidChainOptions {
  /** CHAIN_CONFIRMATIONS for this file (default 1: every automined transaction counts at once). */
  confirmations?: number;
  /** The platform signer; default a fresh random key, funded with gas ETH on the chain. */
  platformKey?: Hex;
}

/**
 * Points this test file's configuration at a local chain as its settlement rail: RPC URL, chain id
 * 31337, the chain's TestUSDC as USDC, a platform signer (whose address receives deposits and x402
 * payments; PLATFORM_ADDRESS unset) and the confirmations rule. With the custody switch open this is
 * what makes the paid-execution gate enabled. Call before startService(); returns the platform account.
 */
export async function usePaidChain(
  chain: LocalChain,
  opts: PaidChainOptions = {},
): Promise<PrivateKeyAccount> {
  const key = opts.platformKey ?? generatePrivateKey();
  const account = privateKeyToAccount(key);
  if (!opts.platformKey) await chain.fundEth(account.address, parseEther("10"));
  overrideConfig({
    chainRpcUrl: chain.rpcUrl,
    chainId: chain.chainId,
    chainName: "Local Hardhat",
    // Checksummed, as USDC_ADDRESS is after config parsing (the deploy receipt gives lowercase).
    usdcAddress: getAddress(chain.tokenAddress),
    platformSignerKey: key,
    platformAddress: undefined,
    chainConfirmations: opts.confirmations ?? 1,
  });
  // The gate caches its RPC check per URL; a new chain must be checked afresh.
  resetGateCache();
  return account;
}
