const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Ids that are not UUIDs are simply unknown (404), never a database cast error (500). */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}
