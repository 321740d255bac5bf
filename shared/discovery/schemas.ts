import { type TSchema, Type } from "@sinclair/typebox";
import { Nullable, Timestamp } from "../kernel/wire.js";
import { A2A_AGENT_CARD_SCHEMA } from "./standards/a2a-agent-card.js";
import { MCP_SERVER_JSON_SCHEMA } from "./standards/mcp-server-json.js";

// Wire schemas of the discovery documents and routes. Documents are open objects: they grow, and
// readers must ignore what they do not know. The A2A card and server.json use the standards' schemas.

const Url = Type.String({ format: "uri" });
const Link = Type.Object({ name: Type.String(), url: Url, method: Type.String() });

export const AgentCardSchema = Type.Unsafe<Record<string, unknown>>(
  A2A_AGENT_CARD_SCHEMA as unknown as TSchema,
);
export const McpServerJsonSchema = Type.Unsafe<Record<string, unknown>>(
  MCP_SERVER_JSON_SCHEMA as unknown as TSchema,
);

const PaidExecution = Type.Object({ enabled: Type.Boolean(), reason: Nullable(Type.String()) });
const Network = Type.Object({
  network: Type.String(),
  chain_id: Type.Integer(),
  name: Type.String(),
  asset: Type.Object({ symbol: Type.Literal("USDC"), address: Type.String(), decimals: Type.Literal(6) }),
});

export const MarketplaceDescriptor = Type.Object({
  schema: Type.Literal("agentmarket.agent-marketplace.v1"),
  name: Type.String(),
  version: Type.String(),
  platform_id: Type.String(),
  description: Type.String(),
  base_url: Url,
  entry_points: Type.Object({ mcp: Nullable(Url), mcp_null_reason: Nullable(Type.String()) }),
  payment_protocols: Type.Array(Type.String()),
  networks: Type.Array(Network),
  fee_rate: Type.Number(),
  split: Type.Object({ seller: Type.Number(), platform: Type.Number() }),
  paid_execution: PaidExecution,
  signing: Type.Object({ jwks_url: Url, algorithms: Type.Array(Type.String()), curve: Type.String() }),
  documentation: Type.Record(Type.String(), Url),
});

export const DiscoveryDocument = Type.Object({
  schema: Type.Literal("agentmarket.discovery.v1"),
  base_url: Url,
  protocols: Type.Array(
    Type.Object({ name: Type.String(), description: Type.String(), paid_execution: Type.Boolean() }),
  ),
  networks: Type.Array(Network),
  auth_schemes: Type.Array(Type.Object({ name: Type.String(), header: Type.String() })),
  tools: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      url: Url,
      price_usdc: Type.String(),
      method: Type.String(),
    }),
  ),
  lanes: Type.Array(Type.Object({ name: Type.String(), description: Type.String() })),
  entry_points: Type.Array(Link),
  mcp: Nullable(Type.Object({ url: Url, transport: Type.String() })),
  mcp_null_reason: Nullable(Type.String()),
});

export const DiscoveryIndex = Type.Object({
  schema: Type.Literal("agentmarket.discovery-index.v1"),
  base_url: Url,
  generated_at: Timestamp,
  documents: Type.Array(
    Type.Object({
      name: Type.String(),
      url: Url,
      media_type: Type.String(),
      sha256: Type.String({ pattern: "^[0-9a-f]{64}$" }),
      bytes: Type.Integer({ minimum: 1 }),
    }),
  ),
  entry_points: Type.Array(Link),
});

const Figure = Type.Object({ computed_at: Timestamp }, { additionalProperties: true });

export const PublicProof = Type.Object({
  schema: Type.Literal("agentmarket.public-proof.v1"),
  base_url: Url,
  network: Type.String(),
  generated_at: Timestamp,
  invocations: Figure,
  settlement: Type.Object({ x402_payments: Figure, deposits: Figure, evidence_rows_by_state: Figure }),
  payouts: Figure,
  listings: Figure,
  hosted_tool_uptime: Figure,
  signing_keys: Figure,
});

export const CatalogPageQuery = Type.Object(
  {
    lane: Type.Optional(
      Type.Union([Type.Literal("featured"), Type.Literal("search"), Type.Literal("registry")]),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000 })),
  },
  { additionalProperties: false },
);

export const MachineCatalog = Type.Object({
  schema: Type.Literal("agentmarket.machine-catalog.v1"),
  lane: Type.String(),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
  has_more: Type.Boolean(),
  listings: Type.Array(
    Type.Object({
      id: Type.String(),
      name: Type.String(),
      pricing: Type.Object({ model: Type.String(), price_usdc: Type.String(), currency: Type.String() }),
      input_schema: Type.Record(Type.String(), Type.Unknown()),
      invoke: Type.Object({ keyed: Type.Object({ method: Type.String(), url: Url }) }),
      record: Url,
    }),
  ),
});

const Check = Type.Object({ name: Type.String(), ok: Type.Boolean(), reason: Nullable(Type.String()) });

export const DiscoveryCheck = Type.Object({
  schema: Type.Literal("agentmarket.discovery-check.v1"),
  ok: Type.Boolean(),
  checked_at: Timestamp,
  documents: Type.Array(
    Type.Object({ name: Type.String(), url: Url, ok: Type.Boolean(), checks: Type.Array(Check) }),
  ),
  links: Type.Array(Type.Object({ url: Url, status: Nullable(Type.Integer()), ok: Type.Boolean() })),
});
