import type { TObject } from "@sinclair/typebox";
import { UnrecoverableError } from "bullmq";
import { createAjv } from "../shared/kernel/json-schema.js";
import { JobMeta } from "../shared/queues.js";

const ajv = createAjv();
const validateMeta = ajv.compile(JobMeta);

/**
 * A payload that breaks its queue's schema can never succeed: it fails at once, without retries. The
 * job's `meta` (trace context, request id: shared/queues.ts JobMeta) is checked on its own and left
 * out of what the processor gets.
 */
export function payloadValidator(schema: TObject): (data: unknown) => unknown {
  const validate = ajv.compile(schema);
  return (data) => {
    const { meta, ...payload } = (data ?? {}) as Record<string, unknown>;
    if (meta !== undefined && !validateMeta(meta))
      throw new UnrecoverableError(`invalid job meta: ${ajv.errorsText(validateMeta.errors)}`);
    if (!validate(payload))
      throw new UnrecoverableError(`invalid job payload: ${ajv.errorsText(validate.errors)}`);
    return payload;
  };
}
