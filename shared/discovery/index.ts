// The discovery context's public surface: every machine-readable document an agent or crawler reads to
// find and use us (llms.txt, agents.txt, skill.md, the service descriptor, the signed A2A card, the MCP
// server.json, the machine catalog, public proof, the index) and the self-check. Generated from the
// route declarations the API hands in, the configuration and live data; owns no table. Depends on
// catalog, money, routing (the signing key) and, like every context, the infrastructure.

export { discoveryCheck, type FetchPath } from "./check.js";
export { discoveryDocumentAt, machineCatalogPage, type ServedDocument } from "./documents.js";
export {
  AgentCardSchema,
  CatalogPageQuery,
  DiscoveryCheck,
  DiscoveryDocument,
  DiscoveryIndex,
  MachineCatalog,
  MarketplaceDescriptor,
  McpServerJsonSchema,
  PublicProof,
} from "./schemas.js";
export type { DiscoverySources, RouteFact } from "./sources.js";
