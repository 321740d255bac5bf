// A JSON Schema for the A2A v1.0 Agent Card, written by us from the A2A specification (specification
// §8 and a2a.proto; facts in docs/discovery.md): the required members, interface bindings, skills,
// security scheme wrappers and signatures. It checks what we serve (tests, /api/discovery/check); it is
// not the upstream file.

const nonEmpty = { type: "string", minLength: 1 } as const;

const securityScheme = {
  type: "object",
  minProperties: 1,
  maxProperties: 1,
  properties: {
    apiKeySecurityScheme: {
      type: "object",
      required: ["location", "name"],
      properties: {
        location: { enum: ["header", "query", "cookie"] },
        name: nonEmpty,
        description: { type: "string" },
      },
    },
    httpAuthSecurityScheme: {
      type: "object",
      required: ["scheme"],
      properties: { scheme: nonEmpty, bearerFormat: { type: "string" }, description: { type: "string" } },
    },
    oauth2SecurityScheme: { type: "object" },
    openIdConnectSecurityScheme: { type: "object" },
    mtlsSecurityScheme: { type: "object" },
  },
  additionalProperties: false,
} as const;

const securityRequirement = {
  type: "object",
  required: ["schemes"],
  properties: {
    schemes: {
      type: "object",
      additionalProperties: {
        type: "object",
        properties: { list: { type: "array", items: { type: "string" } } },
        additionalProperties: false,
      },
    },
  },
} as const;

export const A2A_AGENT_CARD_SCHEMA = {
  title: "A2A v1.0 Agent Card",
  type: "object",
  required: [
    "name",
    "description",
    "version",
    "supportedInterfaces",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
  ],
  properties: {
    name: nonEmpty,
    description: nonEmpty,
    version: nonEmpty,
    supportedInterfaces: {
      type: "array",
      minItems: 1,
      items: {
        type: "object",
        required: ["url", "protocolBinding", "protocolVersion"],
        properties: {
          url: { type: "string", format: "uri" },
          protocolBinding: { enum: ["JSONRPC", "GRPC", "HTTP+JSON"] },
          protocolVersion: { const: "1.0" },
          tenant: { type: "string" },
        },
        additionalProperties: false,
      },
    },
    provider: {
      type: "object",
      required: ["organization", "url"],
      properties: { organization: nonEmpty, url: { type: "string", format: "uri" } },
    },
    documentationUrl: { type: "string", format: "uri" },
    iconUrl: { type: "string", format: "uri" },
    capabilities: {
      type: "object",
      properties: {
        streaming: { type: "boolean" },
        pushNotifications: { type: "boolean" },
        extensions: { type: "array" },
        extendedAgentCard: { type: "boolean" },
      },
      additionalProperties: false,
    },
    securitySchemes: { type: "object", additionalProperties: securityScheme },
    securityRequirements: { type: "array", items: securityRequirement },
    defaultInputModes: { type: "array", minItems: 1, items: nonEmpty },
    defaultOutputModes: { type: "array", minItems: 1, items: nonEmpty },
    skills: {
      type: "array",
      items: {
        type: "object",
        required: ["id", "name", "description", "tags"],
        properties: {
          id: nonEmpty,
          name: nonEmpty,
          description: nonEmpty,
          tags: { type: "array", items: { type: "string" } },
          examples: { type: "array", items: { type: "string" } },
          inputModes: { type: "array", items: { type: "string" } },
          outputModes: { type: "array", items: { type: "string" } },
          securityRequirements: { type: "array", items: securityRequirement },
        },
      },
    },
    signatures: {
      type: "array",
      items: {
        type: "object",
        required: ["protected", "signature"],
        properties: {
          protected: { type: "string", pattern: "^[A-Za-z0-9_-]+$" },
          signature: { type: "string", pattern: "^[A-Za-z0-9_-]+$" },
          header: { type: "object" },
        },
        additionalProperties: false,
      },
    },
  },
} as const;
