import { formatEther, getAddress, parseEther } from "viem";
import { caip2, platformAddress } from "../../chain/client.js";
import { type DevChain, getDevChain } from "../../chain/dev-chain.js";
import { getConfig } from "../../config.js";
import { AppError, validationError } from "../../errors.js";
import { formatUsdc, MICROS_PER_USDC, parseUsdc } from "../../kernel/money.js";
import { parseWalletAddress } from "./link.js";

// DEV_CHAIN=1 only: what a newcomer needs to try deposits on the local chain — where it is, and test
// USDC plus gas ETH for their wallet. These routes are registered only in that mode (else 404).

/** Most test USDC one faucet call mints. */
export const FAUCET_MAX_MICROS = 1000n * MICROS_PER_USDC;
/** A wallet with less gas ETH than this is topped up to FAUCET_GAS_WEI. */
const GAS_FLOOR_WEI = parseEther("0.01");
const FAUCET_GAS_WEI = parseEther("0.1");

function requireDevChain(): DevChain {
  const chain = getConfig().devChain ? getDevChain() : undefined;
  if (!chain) throw new AppError("NOT_FOUND", "no dev chain is running (DEV_CHAIN=1 under npm start)");
  return chain;
}

/** GET /api/dev/chain: the local chain's coordinates. */
export function devChainInfo() {
  const chain = requireDevChain();
  const config = getConfig();
  return {
    rpc_url: chain.rpcUrl,
    chain_id: chain.chainId,
    network: caip2(chain.chainId),
    token_address: getAddress(chain.tokenAddress),
    token: "TestUSDC: 6 decimals, EIP-3009, EIP-712 domain {name 'USD Coin', version '2'}",
    platform_address: platformAddress() ?? null,
    minter: chain.minter.address,
    confirmations_required: config.chainConfirmations,
    faucet: "/api/dev/faucet",
    note:
      "A throwaway local EVM started by npm start with DEV_CHAIN=1: its state is lost on restart and its " +
      "tokens are worthless. Never point a real wallet's funds here.",
  };
}

/** POST /api/dev/faucet: mints test USDC to a wallet and tops up its gas ETH. */
export async function devFaucet(walletAddress: string, amountUsdc: string | number) {
  const chain = requireDevChain();
  const address = parseWalletAddress(walletAddress);
  const amountMicros = parseUsdc(amountUsdc, "/amount_usdc");
  if (amountMicros <= 0n || amountMicros > FAUCET_MAX_MICROS) {
    throw validationError("faucet amount out of range", [
      { path: "/amount_usdc", message: `must be more than 0 and at most ${formatUsdc(FAUCET_MAX_MICROS)}` },
    ]);
  }
  const txHash = await chain.mint(address, amountMicros);
  const eth = await chain.publicClient.getBalance({ address });
  const toppedUp = eth < GAS_FLOOR_WEI;
  if (toppedUp) await chain.fundEth(address, FAUCET_GAS_WEI);
  return {
    tx_hash: txHash,
    wallet_address: address,
    amount_usdc: formatUsdc(amountMicros),
    amount_atomic: amountMicros.toString(),
    token_address: getAddress(chain.tokenAddress),
    chain_id: chain.chainId,
    eth_balance_set_to: toppedUp ? formatEther(FAUCET_GAS_WEI) : null,
    eth_null_reason: toppedUp ? null : "wallet_already_has_gas",
    next: "link this wallet (POST /api/crypto/connect), then POST /api/wallet/purchase for the transfer to make",
  };
}
