import { Type } from "@sinclair/typebox";
import { Nullable, UsdcAmount } from "../../kernel/wire.js";
import { UsdcInput, WalletAddress } from "./wallet.js";

// DEV_CHAIN=1 routes (docs/payments.md "DEV_CHAIN=1").

const Address = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" });

export const DevChainInfo = Type.Object({
  rpc_url: Type.String(),
  chain_id: Type.Integer(),
  network: Type.String(),
  token_address: Address,
  token: Type.String(),
  platform_address: Nullable(Address),
  minter: Address,
  confirmations_required: Type.Integer(),
  faucet: Type.String(),
  note: Type.String(),
});

export const FaucetBody = Type.Object(
  { wallet_address: WalletAddress, amount_usdc: UsdcInput },
  { additionalProperties: false },
);

export const FaucetResult = Type.Object({
  tx_hash: Type.String({ pattern: "^0x[0-9a-fA-F]{64}$" }),
  wallet_address: Address,
  amount_usdc: UsdcAmount,
  amount_atomic: Type.String({ pattern: "^\\d+$" }),
  token_address: Address,
  chain_id: Type.Integer(),
  eth_balance_set_to: Nullable(Type.String()),
  eth_null_reason: Nullable(Type.String()),
  next: Type.String(),
});
