import type { Address, Hash, PublicClient } from "viem";

// The DEV_CHAIN=1 local chain, handed from the `npm start` launcher to the dev routes in-process. Its
// minter key lives only inside the chain object (mint), never in the environment or the config. Tests
// register their own local chain the same way to exercise the dev routes.

/** What the dev routes need of a local chain (shared/chain/local-chain.ts LocalChain fits it). */
export interface DevChain {
  rpcUrl: string;
  chainId: number;
  tokenAddress: Address;
  minter: { address: Address };
  /** Mints test USDC and waits for the receipt. */
  mint(to: Address, amountMicros: bigint): Promise<Hash>;
  /** Sets the ETH balance of `to` to exactly `wei`. */
  fundEth(to: Address, wei: bigint): Promise<void>;
  publicClient: Pick<PublicClient, "getBalance">;
}

let current: DevChain | undefined;

/** Registers the running dev chain (undefined unregisters it). */
export function setDevChain(chain: DevChain | undefined): void {
  current = chain;
}

/** The running dev chain, if the launcher (or a test) registered one. */
export function getDevChain(): DevChain | undefined {
  return current;
}
