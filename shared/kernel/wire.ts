import { type TSchema, Type } from "@sinclair/typebox";
import { ERROR_CODES } from "../errors.js";

export const Uuid = Type.String({ format: "uuid" });
export const Timestamp = Type.String({ format: "date-time" });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);
export const UsdcAmount = Type.String({ pattern: "^\\d+\\.\\d{6}$", description: "USDC, 6 decimals" });

export function Nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

/** The one error shape (docs/api.md "Error envelope"). */
export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.Object({
      code: Type.Union(ERROR_CODES.map((c) => Type.Literal(c))),
      message: Type.String(),
      retryable: Type.Boolean(),
      buyer_action: Type.String(),
      fallback: Type.String(),
      request_id: Type.String(),
      details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    }),
  },
  { title: "ErrorEnvelope" },
);
