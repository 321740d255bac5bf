import type { Db } from "../../db/knex.js";

export interface ConnectorRow {
  id: string;
  owner_agent_id: string;
  deployment_id: string | null;
  connector_type: "trading_connector" | "banking_connector";
  status: "disconnected" | "connection_required" | "connected" | "disabled" | "error";
  mcp_server_name: "trading-connector" | "banking-connector";
  endpoint: string | null;
  risk_level: "high";
  last_probe_at: Date | null;
  last_safe_status: Record<string, unknown>;
  extra: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

export type NewConnector = Pick<
  ConnectorRow,
  | "owner_agent_id"
  | "deployment_id"
  | "connector_type"
  | "status"
  | "mcp_server_name"
  | "endpoint"
  | "last_safe_status"
  | "extra"
>;

export async function insertConnector(q: Db, row: NewConnector): Promise<ConnectorRow> {
  const [inserted] = await q<ConnectorRow>("connectors")
    .insert({
      ...row,
      last_safe_status: JSON.stringify(row.last_safe_status),
      extra: JSON.stringify(row.extra),
    } as never)
    .returning("*");
  return inserted!;
}

/** One agent's connector, or undefined when it does not exist or belongs to someone else. */
export async function findOwnConnector(
  q: Db,
  ownerAgentId: string,
  id: string,
): Promise<ConnectorRow | undefined> {
  return q<ConnectorRow>("connectors").where({ id, owner_agent_id: ownerAgentId }).first();
}

export async function listOwnConnectors(q: Db, ownerAgentId: string, limit: number): Promise<ConnectorRow[]> {
  return q<ConnectorRow>("connectors")
    .where({ owner_agent_id: ownerAgentId })
    .orderBy("created_at", "desc")
    .limit(limit);
}

export async function disableConnector(q: Db, id: string): Promise<ConnectorRow> {
  const [row] = await q<ConnectorRow>("connectors")
    .where({ id })
    .update({ status: "disabled", updated_at: q.fn.now() } as never)
    .returning("*");
  return row!;
}

export async function recordConnectorProbe(
  q: Db,
  id: string,
  lastSafeStatus: Record<string, unknown>,
): Promise<ConnectorRow> {
  const [row] = await q<ConnectorRow>("connectors")
    .where({ id })
    .update({
      last_probe_at: q.fn.now(),
      last_safe_status: JSON.stringify(lastSafeStatus),
      updated_at: q.fn.now(),
    } as never)
    .returning("*");
  return row!;
}
