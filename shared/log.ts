import { type Logger, pino } from "pino";
import { getConfig } from "./config.js";

let root: Logger | undefined;

/** The process-wide structured logger; request-scoped children carry request_id. */
export function logger(): Logger {
  if (!root) root = pino({ level: getConfig().logLevel, base: { pid: process.pid } });
  return root;
}
