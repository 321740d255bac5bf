import { Type } from "@sinclair/typebox";
import { Timestamp, Uuid } from "../kernel/wire.js";

export const IntentSchema = Type.Union([Type.Literal("buyer"), Type.Literal("seller"), Type.Literal("both")]);

export const QuickstartBody = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: 100,
      pattern: "\\S",
      description: "display name of the agent",
    }),
    intent: IntentSchema,
  },
  { additionalProperties: false },
);

const Guidance = Type.Record(Type.String(), Type.Unknown());

export const QuickstartResult = Type.Object({
  agent_id: Uuid,
  name: Type.String(),
  intent: IntentSchema,
  api_key: Type.String({ pattern: "^amk_" }),
  api_key_notice: Type.String(),
  signing_key: Type.String({ description: "Ed25519 private key, PKCS#8 DER, base64url; shown once" }),
  signing_public_key: Type.String({ description: "Ed25519 public key, SPKI DER, base64url" }),
  signing_key_format: Type.String(),
  created_at: Timestamp,
  wallet_setup: Guidance,
  seller_activation: Type.Optional(Guidance),
  next_steps: Type.Array(Type.String()),
});

export const QuickstartInfo = Type.Object({
  name: Type.String(),
  description: Type.String(),
  create_agent: Type.Object({
    method: Type.Literal("POST"),
    path: Type.String(),
    url: Type.String(),
    auth: Type.Literal(false),
    content_type: Type.String(),
    body: Type.Record(Type.String(), Type.Unknown()),
    intents: Type.Array(Type.String()),
    returns: Type.Array(Type.String()),
  }),
  next_steps: Type.Array(Type.String()),
  example: Type.Record(Type.String(), Type.Unknown()),
  docs: Type.Record(Type.String(), Type.String()),
});
