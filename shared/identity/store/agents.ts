import type { Db } from "../../db/knex.js";

export interface AgentRow {
  id: string;
  name: string;
  intent: "buyer" | "seller" | "both";
  signing_public_key: string;
  created_at: Date;
}

export async function insertAgent(
  q: Db,
  agent: Pick<AgentRow, "name" | "intent" | "signing_public_key">,
): Promise<AgentRow> {
  const [row] = await q<AgentRow>("agents").insert(agent).returning("*");
  return row!;
}
