import canonicalize from "canonicalize";
import { FlattenedSign } from "jose";
import { activeSigningKey } from "../routing/index.js";
import { type LiveFacts, SERVICE_NAME, SERVICE_SUMMARY, SERVICE_VERSION } from "./facts.js";
import { type DiscoverySources, urlOf } from "./sources.js";

// /.well-known/agent-card.json: an A2A v1.0 Agent Card for the HTTP+JSON API, signed as A2A asks: a JWS
// (EdDSA, the platform Ed25519 key published in our JWKS) over the JCS (RFC 8785) canonical card without
// `signatures`. The payload is detached: a verifier canonicalises the card it received minus signatures.

/**
 * A2A canonicalises the card without default-valued fields (proto3 JSON). The card we build has none
 * (no false, 0, "" or empty list), so what we sign is exactly what we serve; this drops any that slip in.
 */
export function withoutDefaults(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutDefaults);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === false || v === 0 || v === "" || v === null || v === undefined) continue;
      if (Array.isArray(v) && v.length === 0) continue;
      out[k] = withoutDefaults(v);
    }
    return out;
  }
  return value;
}

/** The bytes a signature covers: the JCS form of the card without `signatures`. */
export function signingInput(card: Record<string, unknown>): Uint8Array {
  const { signatures: _ignored, ...rest } = card;
  return new TextEncoder().encode(canonicalize(withoutDefaults(rest)));
}

function skills(sources: DiscoverySources, facts: LiveFacts) {
  const json = ["application/json"];
  return [
    {
      id: "execute",
      name: "Route a task to a provider",
      description:
        "POST /api/execute with {task, input}: the router ranks listed providers, calls the best, falls " +
        "back when one fails, meters and charges only a successful call, and returns the output with a receipt.",
      tags: ["router", "marketplace", "execute", "fallback"],
      examples: ['{"task":"echo","input":{"message":"hello"}}'],
      inputModes: json,
      outputModes: json,
    },
    {
      id: "match",
      name: "Rank providers for a task",
      description:
        "GET /api/execute/match?task=…: providers with price, latency, success rate and retry safety",
      tags: ["router", "match", "catalog"],
      inputModes: json,
      outputModes: json,
    },
    ...facts.tools.map((t) => ({
      id: `tool-${t.id}`,
      name: t.name,
      description: `${t.description} (${t.method.toUpperCase()} ${urlOf(sources, t.path)}, ${t.price_usdc} USDC)`,
      tags: ["first-party-tool", t.id],
      inputModes: json,
      outputModes: json,
    })),
  ];
}

/** The card before signing (no `signatures`). */
export function unsignedCard(sources: DiscoverySources, facts: LiveFacts): Record<string, unknown> {
  return withoutDefaults({
    name: SERVICE_NAME,
    description: SERVICE_SUMMARY,
    version: SERVICE_VERSION,
    supportedInterfaces: [{ url: sources.baseUrl, protocolBinding: "HTTP+JSON", protocolVersion: "1.0" }],
    provider: { organization: SERVICE_NAME, url: sources.baseUrl },
    documentationUrl: urlOf(sources, "/llms-full.txt"),
    capabilities: {},
    securitySchemes: {
      apiKey: {
        httpAuthSecurityScheme: {
          scheme: "Bearer",
          bearerFormat: "amk_ API key",
          description: `an API key from POST ${urlOf(sources, "/api/quickstart")}`,
        },
      },
    },
    securityRequirements: [{ schemes: { apiKey: {} } }],
    defaultInputModes: ["application/json"],
    defaultOutputModes: ["application/json"],
    skills: skills(sources, facts),
  }) as Record<string, unknown>;
}

/** The signed card: the unsigned card plus one detached JWS by the active platform key. */
export async function signedAgentCard(sources: DiscoverySources, facts: LiveFacts) {
  const card = unsignedCard(sources, facts);
  const key = await activeSigningKey();
  const jws = await new FlattenedSign(signingInput(card))
    .setProtectedHeader({ alg: "EdDSA", typ: "JOSE", kid: key.kid, jku: facts.jwksUrl })
    .sign(key.privateKey);
  return { ...card, signatures: [{ protected: jws.protected, signature: jws.signature }] };
}
