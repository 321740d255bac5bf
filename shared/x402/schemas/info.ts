import { Type } from "@sinclair/typebox";
import { Nullable, Timestamp } from "../../kernel/wire.js";
import { ChainDescriptor } from "../../money/index.js";

// The spec's payment network record (GET /api/x402/info).

const NetworkEntry = Type.Object({
  network: Type.String(),
  network_caip2: Type.String(),
  asset: Type.String(),
  asset_address: Type.String(),
  standard: Type.String(),
  chain_family: Type.Union([Type.Literal("evm"), Type.Literal("solana")]),
  normalization_required: Type.Boolean(),
  execution_ready: Type.Boolean(),
  execution_blockers: Type.Array(Type.String()),
});

const Url = Type.String({ format: "uri" });

export const PaymentNetworkRecord = Type.Object(
  {
    name: Type.String(),
    description: Type.String(),
    payment_protocol: Type.Literal("x402"),
    x402_version: Type.Integer(),
    currency: Type.Literal("USDC"),
    network: Type.String(),
    payment_networks_supported: Type.Array(NetworkEntry),
    payment_network: Type.String(),
    payment_network_caip2: Type.String(),
    payment_asset: Type.String(),
    payment_asset_address: Type.String(),
    settlement_network: Type.String(),
    settlement_network_caip2: Type.String(),
    settlement_asset: Type.String(),
    settlement_asset_address: Type.String(),
    normalization_path: Type.Object({
      type: Type.Literal("same_rail"),
      required: Type.Boolean(),
      status: Type.String(),
      from_network: Type.String(),
      to_network: Type.String(),
      asset: Type.String(),
      settlement_asset: Type.String(),
      provider: Type.Null(),
    }),
    endpoints: Type.Object({
      info: Url,
      marketplace_gateway: Url,
      catalog: Url,
      discover: Url,
      execute_match: Url,
      execute: Url,
      test_echo: Url,
    }),
    endpoint_status: Type.Record(
      Type.String(),
      Type.Object({
        served: Type.Boolean(),
        availability: Type.Union([Type.Literal("live"), Type.Literal("not_served_yet")]),
      }),
    ),
    templates: Type.Object({
      invoke: Type.String(),
      detail: Type.String(),
      discover: Type.String(),
      note: Type.String(),
    }),
    recommended_flow: Type.Object({
      name: Type.Literal("route_first"),
      description: Type.String(),
      steps: Type.Array(Type.String()),
    }),
    marketplace_gateway: Type.Object({ overview: Url, purpose: Type.String() }),
    wallet_requirement: Type.String(),
    walletless_alternative: Type.String(),
    service_card: Url,
    openapi: Url,
    mpp_status: Type.Object({ supported: Type.Boolean(), status: Type.String(), note: Type.String() }),
    paid_execution: Type.Object({
      enabled: Type.Boolean(),
      reason: Nullable(Type.String()),
      read_first: Url,
    }),
    chain: ChainDescriptor,
    local_chain: Type.Boolean(),
    generated_at: Timestamp,
  },
  { title: "PaymentNetworkRecord" },
);
