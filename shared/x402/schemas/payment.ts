import { Type } from "@sinclair/typebox";

// What a buyer sends on the paid retry (docs/x402.md "x402 gateway: how an agent pays"), as JSON Schema: the
// x402 PaymentPayload (v2 in PAYMENT-SIGNATURE / X-PAYMENT-SIGNATURE, v1 or v2 in X-PAYMENT) and the MPP
// credential (Authorization: Payment). Only the EVM "exact" scheme with an EIP-3009 authorization is
// accepted; anything else is malformed for this gateway (400) before any check touches the chain.

const Address = Type.String({ pattern: "^0x[0-9a-fA-F]{40}$" });
const Bytes32 = Type.String({ pattern: "^0x[0-9a-fA-F]{64}$" });
const Uint = Type.String({ pattern: "^(0|[1-9][0-9]{0,77})$" });
const Signature = Type.String({ pattern: "^0x[0-9a-fA-F]{130,}$", maxLength: 4096 });

/** EIP-3009 TransferWithAuthorization, as x402 carries it (integers as decimal strings). */
export const Eip3009Authorization = Type.Object({
  from: Address,
  to: Address,
  value: Uint,
  validAfter: Uint,
  validBefore: Uint,
  nonce: Bytes32,
});

const ExactEvmPayload = Type.Object({ signature: Signature, authorization: Eip3009Authorization });

const Requirements = Type.Object({
  scheme: Type.String({ maxLength: 64 }),
  network: Type.String({ maxLength: 128 }),
  asset: Type.String({ maxLength: 128 }),
  amount: Type.String({ maxLength: 80 }),
  payTo: Type.String({ maxLength: 128 }),
  maxTimeoutSeconds: Type.Integer({ minimum: 0 }),
  extra: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

export const X402PaymentPayloadV2 = Type.Object({
  x402Version: Type.Literal(2),
  accepted: Requirements,
  payload: ExactEvmPayload,
  resource: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  extensions: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

export const X402PaymentPayloadV1 = Type.Object({
  x402Version: Type.Literal(1),
  scheme: Type.String({ maxLength: 64 }),
  network: Type.String({ maxLength: 128 }),
  payload: ExactEvmPayload,
});

/** The challenge auth-params an MPP credential echoes (draft-httpauth-payment). */
export const MppChallengeParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 256 }),
  realm: Type.String({ minLength: 1, maxLength: 256 }),
  method: Type.String({ maxLength: 64 }),
  intent: Type.String({ maxLength: 64 }),
  request: Type.String({ minLength: 1, maxLength: 8192 }),
  expires: Type.Optional(Type.String({ maxLength: 64 })),
  digest: Type.Optional(Type.String({ maxLength: 256 })),
  opaque: Type.Optional(Type.String({ maxLength: 1024 })),
  description: Type.Optional(Type.String({ maxLength: 1024 })),
});

/** draft-evm-charge: the "authorization" (EIP-3009) credential payload. */
export const MppCredential = Type.Object({
  challenge: MppChallengeParams,
  source: Type.Optional(Type.String({ maxLength: 256 })),
  payload: Type.Object({
    type: Type.Literal("authorization"),
    from: Address,
    to: Address,
    value: Uint,
    validAfter: Uint,
    validBefore: Uint,
    nonce: Bytes32,
    signature: Signature,
  }),
});
