// A JSON Schema for the MCP registry's server.json (schema 2025-12-11), written by us from the
// registry's reference documentation (facts in docs/discovery.md): required name, description and
// version, the name pattern and lengths, remotes with header variables. It checks what we serve.

export const MCP_SERVER_SCHEMA_URL =
  "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";

const input = {
  type: "object",
  properties: {
    description: { type: "string" },
    isRequired: { type: "boolean" },
    isSecret: { type: "boolean" },
    format: { type: "string" },
    value: { type: "string" },
    default: { type: "string" },
    choices: { type: "array", items: { type: "string" } },
  },
} as const;

const keyValueInput = {
  type: "object",
  required: ["name"],
  properties: {
    ...input.properties,
    name: { type: "string", minLength: 1 },
    variables: { type: "object", additionalProperties: input },
  },
} as const;

export const MCP_SERVER_JSON_SCHEMA = {
  title: "MCP registry server.json (2025-12-11)",
  type: "object",
  required: ["$schema", "name", "description", "version"],
  properties: {
    $schema: { const: MCP_SERVER_SCHEMA_URL },
    name: { type: "string", minLength: 3, maxLength: 200, pattern: "^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$" },
    title: { type: "string", minLength: 1, maxLength: 100 },
    description: { type: "string", minLength: 1, maxLength: 100 },
    // An exact version: no ranges, no "latest".
    version: {
      type: "string",
      minLength: 1,
      maxLength: 255,
      not: { pattern: "^(latest|[\\^~<>=*].*|.*\\s.*)$" },
    },
    websiteUrl: { type: "string", format: "uri" },
    repository: {
      type: "object",
      required: ["url", "source"],
      properties: { url: { type: "string", format: "uri" }, source: { type: "string" } },
    },
    packages: { type: "array" },
    remotes: {
      type: "array",
      items: {
        type: "object",
        required: ["type", "url"],
        properties: {
          type: { enum: ["streamable-http", "sse"] },
          url: { type: "string", format: "uri" },
          headers: { type: "array", items: keyValueInput },
          variables: { type: "object", additionalProperties: input },
        },
      },
    },
    _meta: { type: "object" },
  },
} as const;
