import { db } from "../db/knex.js";
import { AppError, validationError } from "../errors.js";
import { checkUrlRules } from "../net/url-policy.js";
import { listMcpTools } from "./probes/index.js";
import {
  type ConnectorRow,
  disableConnector,
  findOwnConnector,
  insertConnector,
  listOwnConnectors,
  recordConnectorProbe,
} from "./store/connectors.js";
import { connectorSchemaName } from "./terms.js";

// Connector records (the spec's agent connector record v1; docs/verification.md "Connector records"):
// an agent's trading or banking MCP connector. Enums are the spec's; risk_level is `high` only; extra
// properties are kept verbatim. A probe runs initialize + tools/list with the official MCP client through
// safe fetch and records what it saw; it never calls a tool, never sends credentials, never connects an
// account, and never changes the record's status.

const OWN_FIELDS = ["deployment_id", "connector_type", "status", "mcp_server_name", "endpoint", "risk_level"];
/** Set by the service, never by the caller. */
const SERVICE_FIELDS = [
  "connector_id",
  "last_probe_at",
  "last_safe_status",
  "schema",
  "created_at",
  "updated_at",
];

const NEVER_PROBED = { schema_probe_available: false, tools_visible: false, requires_connection: true };

export type ConnectorInput = Record<string, unknown> & {
  connector_type: ConnectorRow["connector_type"];
  mcp_server_name: ConnectorRow["mcp_server_name"];
  status?: ConnectorRow["status"];
  deployment_id?: string;
  endpoint?: string;
  risk_level?: "high";
};

const notFound = (id: string) =>
  new AppError("NOT_FOUND", "no connector with this id for this agent", { connector_id: id });

const isUuid = (id: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id);

function checkEndpoint(endpoint: string): void {
  try {
    const url = new URL(endpoint);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("must use http or https");
    if (url.username || url.password) throw new Error("must not carry credentials");
    checkUrlRules(url);
  } catch (error) {
    throw validationError("endpoint is not an MCP URL probes may call", [
      { path: "/endpoint", message: (error as Error).message },
    ]);
  }
}

/** POST /api/connectors */
export async function createConnector(agentId: string, input: ConnectorInput): Promise<ConnectorRow> {
  const reserved = SERVICE_FIELDS.filter((f) => f in input);
  if (reserved.length > 0)
    throw validationError(
      "these fields are set by the service",
      reserved.map((f) => ({ path: `/${f}`, message: "is set by the service, not the caller" })),
    );
  if (input.endpoint !== undefined) checkEndpoint(input.endpoint);
  const extra = Object.fromEntries(Object.entries(input).filter(([k]) => !OWN_FIELDS.includes(k)));
  return insertConnector(db(), {
    owner_agent_id: agentId,
    deployment_id: input.deployment_id ?? null,
    connector_type: input.connector_type,
    status: input.status ?? "disconnected",
    mcp_server_name: input.mcp_server_name,
    endpoint: input.endpoint ?? null,
    last_safe_status: NEVER_PROBED,
    extra,
  });
}

export async function readConnector(agentId: string, id: string): Promise<ConnectorRow> {
  const row = isUuid(id) ? await findOwnConnector(db(), agentId, id) : undefined;
  if (!row) throw notFound(id);
  return row;
}

export function listConnectors(agentId: string): Promise<ConnectorRow[]> {
  return listOwnConnectors(db(), agentId, 100);
}

export async function disableOwnConnector(agentId: string, id: string): Promise<ConnectorRow> {
  const row = await readConnector(agentId, id);
  return row.status === "disabled" ? row : disableConnector(db(), row.id);
}

/**
 * POST /api/connectors/:id/probe: initialize + tools/list, nothing more. requires_connection is true when
 * the server refuses an unauthenticated client (401/403) or shows no tools until an account is connected.
 */
export async function probeConnector(agentId: string, id: string): Promise<ConnectorRow> {
  const row = await readConnector(agentId, id);
  if (row.status === "disabled")
    throw new AppError("CONFLICT", "a disabled connector is not probed", { connector_id: id });
  if (!row.endpoint)
    throw new AppError("CONFLICT", "the connector has no endpoint to probe", { connector_id: id });
  const listing = await listMcpTools(row.endpoint);
  const refused = listing.lastStatus === 401 || listing.lastStatus === 403;
  return recordConnectorProbe(db(), row.id, {
    schema_probe_available: listing.initialized,
    tools_visible: listing.toolsListed && listing.tools.length > 0,
    requires_connection: refused || !listing.toolsListed || listing.tools.length === 0,
    probed_with: "mcp_client_initialize_and_tools_list",
    account_connected: false,
    tools_called: 0,
    tool_count: listing.tools.length,
    server: listing.server,
    last_http_status: listing.lastStatus,
    error: listing.error,
  });
}

/** The agent connector record v1: the extra properties, then the record's own fields. */
export function connectorView(row: ConnectorRow) {
  return {
    ...row.extra,
    schema: connectorSchemaName(),
    connector_id: row.id,
    ...(row.deployment_id !== null ? { deployment_id: row.deployment_id } : {}),
    connector_type: row.connector_type,
    status: row.status,
    mcp_server_name: row.mcp_server_name,
    ...(row.endpoint !== null ? { endpoint: row.endpoint } : {}),
    risk_level: row.risk_level,
    last_probe_at: row.last_probe_at?.toISOString() ?? null,
    last_safe_status: row.last_safe_status as {
      schema_probe_available: boolean;
      tools_visible: boolean;
      requires_connection: boolean;
    },
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
