import { Type } from "@sinclair/typebox";
import { Nullable, NullableTimestamp, Timestamp, UsdcAmount, Uuid } from "../../kernel/wire.js";
import { PayoutSummary } from "./seller-money.js";

// Wire schemas of the wallet and funding routes (docs/payments.md "Wallet and funding").

export const WalletAddress = Type.String({
  pattern: "^0x[0-9a-fA-F]{40}$",
  description: "EVM address; all-lowercase, all-uppercase, or mixed case with a valid EIP-55 checksum",
});
const Address = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$", description: "EIP-55 checksummed" });
export const TxHash = Type.String({ pattern: "^0x[0-9a-fA-F]{64}$", description: "0x + 64 hex" });

/** A USDC amount in a request: a decimal string (preferred) or a JSON number, at most 6 decimals. */
export const UsdcInput = Type.Union(
  [Type.String({ pattern: "^\\d{1,12}(\\.\\d{1,6})?$" }), Type.Number({ minimum: 0 })],
  { description: 'USDC, e.g. "25.50"; at most 6 decimals' },
);

const NullReason = Nullable(Type.String());

export const GasEstimate = Type.Object({
  gas_units: Type.Integer(),
  gas_price_gwei: Nullable(Type.String()),
  gas_price_null_reason: NullReason,
  estimated_cost_eth: Nullable(Type.String()),
  estimated_cost_eth_null_reason: NullReason,
  estimated_cost_usd: Nullable(Type.String()),
  estimated_cost_usd_null_reason: Type.String(),
  observed_at: NullableTimestamp,
});

/** The spec's chain descriptor (wallet funding info). */
export const ChainDescriptor = Type.Object(
  {
    name: Type.String(),
    chainId: Type.Integer(),
    network: Type.String(),
    rpcUrl: Nullable(Type.String()),
    rpcUrl_null_reason: NullReason,
    usdc: Address,
    explorer: Nullable(Type.String()),
    explorer_null_reason: NullReason,
    decimals: Type.Literal(6),
    platform_address: Nullable(Address),
    platform_address_null_reason: NullReason,
    platform_fee_rate: Type.Number(),
    payment_methods: Type.Array(Type.String()),
    supported_tokens: Type.Array(Type.String()),
    settlement: Type.Literal("on_chain"),
    confirmations_required: Type.Integer(),
    gas_estimate: GasEstimate,
    instructions: Type.Array(Type.String()),
    how_to_get_usdc_on_base: Type.Array(Type.String()),
    gas_note: Type.String(),
    faucet: Nullable(Type.Record(Type.String(), Type.Unknown())),
    faucet_null_reason: NullReason,
  },
  { title: "ChainDescriptor" },
);

const DepositStatus = Type.Union([
  Type.Literal("pending"),
  Type.Literal("confirming"),
  Type.Literal("credited"),
  Type.Literal("rejected"),
]);

export const Deposit = Type.Object(
  {
    deposit_id: Uuid,
    status: DepositStatus,
    state: Type.Union(
      ["not_seen", "confirming", "credited", "refused", "checking"].map((state) => Type.Literal(state)),
      { description: 'what the chain showed at the last check (docs/payments.md "Deposits")' },
    ),
    message: Type.String(),
    tx_hash: TxHash,
    chain_id: Type.Integer(),
    network: Type.String(),
    currency: Type.Literal("USDC"),
    from_address: Address,
    to_address: Address,
    token_address: Address,
    amount_usdc: Nullable(UsdcAmount),
    amount_atomic: Nullable(Type.String({ pattern: "^\\d+$" })),
    amount_null_reason: NullReason,
    confirmations: Type.Object({ seen: Type.Integer(), required: Type.Integer() }),
    block_number: Nullable(Type.Integer()),
    waiting_reason: NullReason,
    rejected_reason: NullReason,
    ledger_transaction_id: Nullable(Uuid),
    explorer_url: Nullable(Type.String()),
    created_at: Timestamp,
    updated_at: Timestamp,
    resolved_at: NullableTimestamp,
    status_url: Type.String(),
  },
  { title: "Deposit" },
);

export const DepositWithEvidence = Type.Intersect([
  Deposit,
  Type.Object({
    evidence: Type.Array(
      Type.Object({
        state: Type.String(),
        source: Type.String(),
        source_ref: Nullable(Type.String()),
        amount_usdc: Nullable(UsdcAmount),
        details: Type.Record(Type.String(), Type.Unknown()),
        recorded_at: Timestamp,
      }),
    ),
  }),
]);

const Balance = Type.Object({
  available_usdc: UsdcAmount,
  held_usdc: UsdcAmount,
  seller_payable_usdc: UsdcAmount,
  bonds_usdc: UsdcAmount,
  decimals: Type.Literal(6),
});

export const LinkedWallet = Type.Object({
  address: Address,
  chain_family: Type.Literal("evm"),
  method: Type.Union([Type.Literal("signature"), Type.Literal("generated")]),
  linked_at: Timestamp,
});

export const WalletView = Type.Object({
  agent_id: Uuid,
  balances: Type.Object({
    USDC: Balance,
    tUSDC: Type.Optional(Type.Intersect([Balance, Type.Object({ note: Type.String() })])),
  }),
  linked_wallet: Nullable(LinkedWallet),
  linked_wallet_null_reason: NullReason,
  funding: Type.Object({
    status: Type.String(),
    reason: NullReason,
    paid_execution_enabled: Type.Boolean(),
    contract: Type.String(),
    read_first: Type.String(),
  }),
  deposit_to: Type.Object({
    network: Type.String(),
    token_address: Address,
    platform_address: Nullable(Address),
    platform_address_null_reason: NullReason,
    confirmations_required: Type.Integer(),
  }),
  pending_deposits: Type.Array(Deposit),
  recent_deposits: Type.Array(Deposit),
  payouts: PayoutSummary,
  links: Type.Record(Type.String(), Type.String()),
});

export const Pricing = Type.Object({
  currency: Type.Literal("USDC"),
  decimals: Type.Literal(6),
  amounts: Type.String(),
  platform_fee_rate: Type.Number(),
  split: Type.Object({
    seller: Type.Number(),
    platform: Type.Number(),
    fee_rule: Type.String(),
    rounding: Type.String(),
    example: Type.Object({ amount_usdc: UsdcAmount, fee_usdc: UsdcAmount, seller_usdc: UsdcAmount }),
  }),
  listings: Type.Record(Type.String(), Type.String()),
  tools: Type.Array(Type.Object({ service: Type.String(), price_usdc: UsdcAmount, unit: Type.String() })),
  verification: Type.Object({ price_usdc: UsdcAmount, unit: Type.String(), note: Type.String() }),
  seller_bond_usdc: UsdcAmount,
  deposits: Type.Object({
    minimum_purchase_usdc: UsdcAmount,
    maximum_purchase_usdc: UsdcAmount,
    minimum_note: Type.String(),
    credited_to: Type.String(),
  }),
  funding: Type.Object({ status: Type.String(), reason: NullReason }),
  chain: ChainDescriptor,
});

export const ConnectBody = Type.Object(
  {
    wallet_address: WalletAddress,
    challenge_id: Type.Optional(Uuid),
    signature: Type.Optional(
      Type.String({ pattern: "^0x[0-9a-fA-F]+$", maxLength: 2050, description: "personal_sign result" }),
    ),
  },
  { additionalProperties: false },
);

export const ConnectChallenge = Type.Object({
  step: Type.Literal("sign_challenge"),
  challenge: Type.Object({
    challenge_id: Uuid,
    wallet_address: Address,
    chain_id: Type.Integer(),
    nonce: Type.String(),
    message: Type.String(),
    issued_at: Timestamp,
    expires_at: Timestamp,
  }),
  signing: Type.Record(Type.String(), Type.Unknown()),
  next: Type.Object({
    method: Type.Literal("POST"),
    path: Type.String(),
    body: Type.Record(Type.String(), Type.String()),
  }),
});

export const ConnectLinked = Type.Object({
  step: Type.Literal("linked"),
  linked_wallet: LinkedWallet,
  already_linked: Type.Boolean(),
  replaced_address: Nullable(Address),
  note: Type.String(),
  wallet_url: Type.String(),
});

export const GeneratedWallet = Type.Object({
  address: Address,
  private_key: Type.String({ pattern: "^0x[0-9a-f]{64}$" }),
  private_key_notice: Type.String(),
  key_format: Type.String(),
  custody: Type.Literal("self"),
  chain_family: Type.Literal("evm"),
  network: Type.String(),
  linked: Type.Boolean(),
  linked_wallet: LinkedWallet,
  link_note: Type.String(),
  next_steps: Type.Array(Type.String()),
});

export const PurchaseBody = Type.Object(
  {
    amount_usdc: UsdcInput,
    method: Type.Optional(
      Type.Union([Type.Literal("transfer"), Type.Literal("authorization")], {
        description:
          "transfer (default): you send an ERC-20 transfer and pay its gas; authorization: you sign an " +
          "EIP-3009 TransferWithAuthorization and the platform submits it and pays the gas (gasless)",
      }),
    ),
  },
  { additionalProperties: false },
);

const Uint256String = Type.String({ pattern: "^\\d{1,78}$", description: "uint256 as a decimal string" });

/** The EIP-712 typed data of a gasless deposit, as eth_signTypedData_v4 takes it. */
export const DepositTypedData = Type.Object(
  {
    domain: Type.Object({
      name: Type.String(),
      version: Type.String(),
      chainId: Type.Integer(),
      verifyingContract: Address,
    }),
    types: Type.Record(Type.String(), Type.Array(Type.Object({ name: Type.String(), type: Type.String() }))),
    primaryType: Type.Literal("TransferWithAuthorization"),
    message: Type.Object({
      from: Address,
      to: Address,
      value: Uint256String,
      validAfter: Uint256String,
      validBefore: Uint256String,
      nonce: Type.String({ pattern: "^0x[0-9a-f]{64}$" }),
    }),
  },
  { title: "DepositTypedData" },
);

export const DepositAuthorizationRequest = Type.Object({
  deposit_request_id: Uuid,
  expires_at: Timestamp,
  typed_data: DepositTypedData,
  signing: Type.Record(Type.String(), Type.String()),
});

export const PurchaseInstructions = Type.Object({
  purchase: Type.Literal("deposit_request"),
  method: Type.Union([Type.Literal("transfer"), Type.Literal("authorization")]),
  status: Type.Union([Type.Literal("awaiting_transfer"), Type.Literal("awaiting_signature")]),
  amount_usdc: UsdcAmount,
  amount_atomic: Type.String({ pattern: "^\\d+$" }),
  currency: Type.Literal("USDC"),
  decimals: Type.Literal(6),
  transfer: Type.Object({
    network: Type.String(),
    chain_id: Type.Integer(),
    token_address: Address,
    from_address: Address,
    to_address: Address,
    method: Type.String(),
    eip681_uri: Type.String(),
  }),
  /** method "authorization" only: the message to sign and the request it is stored as. */
  authorization: Type.Optional(DepositAuthorizationRequest),
  confirmations_required: Type.Integer(),
  rules: Type.Array(Type.String()),
  next: Type.Object({
    method: Type.Literal("POST"),
    path: Type.String(),
    url: Type.String(),
    body: Type.Record(Type.String(), Type.String()),
  }),
  chain: ChainDescriptor,
});

export const AuthorizeBody = Type.Object(
  {
    deposit_request_id: Uuid,
    signature: Type.String({
      pattern: "^0x[0-9a-fA-F]{130}$",
      description: "the 65-byte EIP-712 signature (eth_signTypedData_v4) of the request's typed_data",
    }),
  },
  { additionalProperties: false },
);

export const VerifyBody = Type.Object({ tx_hash: TxHash }, { additionalProperties: false });

export const VerifyResult = Type.Intersect([Deposit, Type.Object({ replayed: Type.Boolean() })]);
