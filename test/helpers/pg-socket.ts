import { db } from "../../shared/db/knex.js";

// A pooled connection's socket, watched: what it writes, and when PostgreSQL's answers (ReadyForQuery, one
// per statement) arrive. For tests of statements sent without waiting for each other
// (shared/db/pipeline.ts).

interface PgConnection {
  connection: {
    stream: {
      write: (...args: unknown[]) => boolean;
      _write: (...args: unknown[]) => unknown;
      _writev: (...args: unknown[]) => unknown;
    };
    on(event: "readyForQuery", listener: () => void): void;
    off(event: "readyForQuery", listener: () => void): void;
  };
}

/**
 * The pool's one connection, watched: "write" for each message written, "answer" for each statement's
 * end, and "socket" for each time the stream hands what it holds to the socket (one system call). The
 * pool then holds just this connection, so the next transaction takes it.
 */
export async function watchThePoolsConnection(): Promise<{ log: string[]; stop(): void }> {
  const client = db().client as {
    acquireConnection(): Promise<PgConnection>;
    releaseConnection(c: PgConnection): Promise<unknown>;
  };
  const pg = await client.acquireConnection();
  const log: string[] = [];
  const stream = pg.connection.stream;
  const write = stream.write;
  stream.write = (...args: unknown[]) => {
    log.push("write");
    return write.apply(stream, args);
  };
  const { _write, _writev } = stream;
  stream._write = (...args: unknown[]) => {
    log.push("socket");
    return _write.apply(stream, args);
  };
  stream._writev = (...args: unknown[]) => {
    log.push("socket");
    return _writev.apply(stream, args);
  };
  const answered = () => log.push("answer");
  pg.connection.on("readyForQuery", answered);
  await client.releaseConnection(pg);
  return {
    log,
    stop() {
      stream.write = write;
      stream._write = _write;
      stream._writev = _writev;
      pg.connection.off("readyForQuery", answered);
    },
  };
}
