import { validateListingInput } from "../kernel/json-schema.js";
import { checkToolInput, toolBlockReason } from "../tools/index.js";
import type { ListingRow } from "./store/listings.js";

// The catalog's view of first-party tools (docs/tools.md): a listing bound to a tool whose provider is not
// configured is hidden (store/listings.ts withoutUnavailableTools) and refused before any hold.

/** Why a listing cannot be called because its tool's provider is not configured, or null. */
export function toolUnavailableReason(listing: Pick<ListingRow, "tool_id">): string | null {
  return toolBlockReason(listing.tool_id);
}

/**
 * Validates a call's input before any money is held: the listing's input_schema (400 listing every
 * violation), then a tool's own input rules (a scrape url naming a private host → 400).
 */
export function checkListingInput(
  listing: Pick<ListingRow, "id" | "version" | "input_schema" | "tool_id">,
  input: unknown,
): void {
  validateListingInput(listing, input);
  checkToolInput(listing.tool_id, input);
}
