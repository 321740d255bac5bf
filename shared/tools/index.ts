// The tools context's public surface: first-party providers the platform serves itself — the echo
// endpoint, and the four priced tools (document parse, page scrape, web search, research brief) with the
// registry that says which of them may run here (docs/tools.md). Depends on no context.

export { buildEcho, ECHO_DEFAULT_MESSAGE } from "./echo.js";
// In-process parsing without the worker thread: for the benchmark's comparison and tests only. The
// parsers load on the first call, so importing the context does not load them.
export { decodeDocument } from "./parse/document.js";
export const loadRunParser = async () => (await import("./parse/run-parser.js")).runParser;
export { PARSE_MAX_INPUT_BYTES, ParseInput, ParseOutput } from "./parse/schemas.js";
export {
  availableToolIds,
  isToolId,
  TOOL_IDS,
  TOOLS,
  type ToolAvailability,
  type ToolFacts,
  type ToolId,
  toolAvailability,
  toolBlockReason,
} from "./registry.js";
export { BRIEF_SCHEMA, ResearchInput, ResearchOutput } from "./research/schemas.js";
export { EchoQuery, EchoResult, ProviderCallBody } from "./schemas.js";
export { ScrapeInput, ScrapeOutput } from "./scrape/schemas.js";
export { SearchInput, SearchOutput } from "./search/schemas.js";
export {
  checkToolInput,
  requireToolAvailable,
  runParse,
  runResearch,
  runScrape,
  runSearch,
} from "./tools.js";
