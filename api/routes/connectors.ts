import type { Static } from "@sinclair/typebox";
import {
  ConnectorBody,
  type ConnectorInput,
  ConnectorList,
  ConnectorParams,
  ConnectorRecord,
  connectorView,
  createConnector,
  disableOwnConnector,
  listConnectors,
  probeConnector,
  readConnector,
} from "../../shared/verification/index.js";
import { defineRoute, Reply } from "../route.js";

// Connector records (the agent connector record v1; docs/verification.md "Connector records"). The spec
// leaves these routes "not shown": create, list own, read, disable and a safe probe, all the owner's only.

const create = defineRoute({
  method: "post",
  path: "/api/connectors",
  tag: "connectors",
  summary:
    "Record an agent connector (trading or banking MCP connector; risk_level high; extra properties kept)",
  auth: "key",
  body: ConnectorBody,
  responses: { 201: ConnectorRecord },
  errors: ["UNAUTHORIZED", "SCHEMA_VALIDATION_FAILED"],
  async handle(ctx, { body }: { body: Static<typeof ConnectorBody> }) {
    const row = await createConnector(ctx.state.auth!.agentId, body as ConnectorInput);
    return new Reply(201, connectorView(row));
  },
});

const list = defineRoute({
  method: "get",
  path: "/api/connectors",
  tag: "connectors",
  summary: "The calling agent's connector records, newest first (at most 100)",
  auth: "key",
  responses: { 200: ConnectorList },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    return { connectors: (await listConnectors(ctx.state.auth!.agentId)).map(connectorView) };
  },
});

const read = defineRoute({
  method: "get",
  path: "/api/connectors/{connector_id}",
  tag: "connectors",
  summary: "One of the calling agent's connector records",
  auth: "key",
  params: ConnectorParams,
  responses: { 200: ConnectorRecord },
  errors: ["UNAUTHORIZED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof ConnectorParams> }) {
    return connectorView(await readConnector(ctx.state.auth!.agentId, params.connector_id));
  },
});

const disable = defineRoute({
  method: "post",
  path: "/api/connectors/{connector_id}/disable",
  tag: "connectors",
  summary: "Disable a connector record (status disabled; it is no longer probed)",
  auth: "key",
  params: ConnectorParams,
  responses: { 200: ConnectorRecord },
  errors: ["UNAUTHORIZED", "NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof ConnectorParams> }) {
    return connectorView(await disableOwnConnector(ctx.state.auth!.agentId, params.connector_id));
  },
});

const probe = defineRoute({
  method: "post",
  path: "/api/connectors/{connector_id}/probe",
  tag: "connectors",
  summary:
    "Probe the connector's MCP endpoint (initialize + tools/list only): fills last_probe_at and last_safe_status",
  description:
    "Never calls a tool, never sends credentials, never connects an account, never changes status.",
  auth: "key",
  params: ConnectorParams,
  responses: { 200: ConnectorRecord },
  errors: ["UNAUTHORIZED", "NOT_FOUND", "CONFLICT"],
  async handle(ctx, { params }: { params: Static<typeof ConnectorParams> }) {
    return connectorView(await probeConnector(ctx.state.auth!.agentId, params.connector_id));
  },
});

export const connectorRoutes = [create, list, read, disable, probe];
