import { Type } from "@sinclair/typebox";
import { publishedJwks } from "../../shared/routing/index.js";
import { defineRoute, Reply } from "../route.js";

const Jwk = Type.Object({
  kty: Type.Literal("OKP"),
  crv: Type.Literal("Ed25519"),
  x: Type.String({ description: "public key, base64url" }),
  kid: Type.String({ description: "RFC 7638 thumbprint; calls name it in webhook-key-id" }),
  use: Type.Literal("sig"),
  alg: Type.Literal("EdDSA"),
});

const jwksRoute = defineRoute({
  method: "get",
  path: "/.well-known/jwks.json",
  tag: "discovery",
  summary: "Public keys that verify the platform's signed calls to seller endpoints",
  description:
    "The active Ed25519 key and keys retired within the last 7 days. Sellers verify the webhook-signature header of each call with the key named by webhook-key-id; on an unknown kid, fetch this document again.",
  auth: "none",
  responses: { 200: Type.Object({ keys: Type.Array(Jwk) }) },
  async handle() {
    // Short cache: a rotated-in key must reach sellers quickly, and they refetch on an unknown kid anyway.
    return new Reply(200, await publishedJwks(), { "cache-control": "public, max-age=300" });
  },
});

export const jwksRoutes = [jwksRoute];
