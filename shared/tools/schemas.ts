import { Type } from "@sinclair/typebox";
import { Timestamp, Uuid } from "../kernel/wire.js";

export const EchoQuery = Type.Object({
  message: Type.Optional(Type.String({ maxLength: 4000 })),
});

export const EchoInput = Type.Object(
  {
    message: Type.Optional(Type.String({ maxLength: 4000 })),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { additionalProperties: true },
);

/** The invocation protocol body every provider receives (docs/routing.md "Calling a seller"). */
export const ProviderCallBody = Type.Object({
  invocation_id: Type.Optional(Uuid),
  listing_id: Type.Optional(Uuid),
  attempt: Type.Optional(Type.Integer({ minimum: 1 })),
  input: EchoInput,
});

export const EchoResult = Type.Object({
  success: Type.Boolean(),
  output: Type.Object({
    echo: Type.Record(Type.String(), Type.Unknown()),
    server: Type.Object({
      timestamp: Timestamp,
      platform: Type.String(),
      received_at_ms: Type.Integer(),
      processing_time_ms: Type.Integer(),
      node_version: Type.String(),
    }),
    headers_received: Type.Record(Type.String(), Type.String()),
    tip: Type.String(),
  }),
});
