// Agent Market for Node (docs in sdk/node/README.md).
export * from "./client.js";
export * from "./errors.js";
export type { components, paths } from "./openapi.js";
