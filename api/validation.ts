import type { TSchema } from "@sinclair/typebox";
import { validationError } from "../shared/errors.js";
import { createAjv, violationsOf } from "../shared/kernel/json-schema.js";

const bodyAjv = createAjv({ useDefaults: true });
const coercingAjv = createAjv({ useDefaults: true, coerceTypes: true });
const checkingAjv = createAjv();

export type Validator = (value: unknown) => unknown;

/** Compiles a request-part validator; query and path values are coerced from strings. */
export function compileValidator(schema: TSchema, part: "params" | "query" | "body"): Validator {
  const fn = (part === "body" ? bodyAjv : coercingAjv).compile(schema);
  const base = part === "body" ? "" : `/${part}`;
  return (value) => {
    if (!fn(value)) throw validationError(`request ${part} is invalid`, violationsOf(fn.errors, base));
    return value;
  };
}

/** For response checks in tests (VALIDATE_RESPONSES): undefined when valid, else the violations. */
export function compileResponseCheck(schema: TSchema): (value: unknown) => string | undefined {
  const fn = checkingAjv.compile(schema);
  return (value) => (fn(value) ? undefined : JSON.stringify(violationsOf(fn.errors)));
}
