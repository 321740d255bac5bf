import type { TObject } from "@sinclair/typebox";
import { UnrecoverableError } from "bullmq";
import { createAjv } from "../shared/kernel/json-schema.js";

const ajv = createAjv();

/** A payload that breaks its queue's schema can never succeed: it fails at once, without retries. */
export function payloadValidator(schema: TObject): (data: unknown) => unknown {
  const validate = ajv.compile(schema);
  return (data) => {
    if (!validate(data))
      throw new UnrecoverableError(`invalid job payload: ${ajv.errorsText(validate.errors)}`);
    return data;
  };
}
