import { createServer } from "node:net";

/**
 * A fixed port the service needs, with the setting that chooses it, so that a failed start can say in
 * one line which port is taken and which variable moves it.
 */
export interface NeededPort {
  variable: string;
  port: number;
  host: string;
}

export class PortInUse extends Error {
  constructor(readonly needed: NeededPort) {
    super(
      `${needed.variable}: port ${needed.port} is already in use on ${needed.host}; ` +
        `stop what holds it or set ${needed.variable} to a free port`,
    );
  }
}

/** True when the error is the OS refusing a bind because the address is taken. */
export function isAddressInUse(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === "EADDRINUSE";
}

/**
 * Checks, before anything is started, that every fixed port can be bound, so a clash fails the start
 * before any child process exists. Port 0 (any) always passes. A port taken between this check and the
 * real bind is still reported the same way by the caller (see isAddressInUse).
 */
export async function assertPortsFree(ports: readonly NeededPort[]): Promise<void> {
  for (const needed of ports) {
    if (needed.port === 0) continue;
    await new Promise<void>((resolve, reject) => {
      const probe = createServer();
      probe.unref();
      probe.once("error", (err) => reject(isAddressInUse(err) ? new PortInUse(needed) : err));
      probe.listen(needed.port, needed.host, () => probe.close(() => resolve()));
    });
  }
}
