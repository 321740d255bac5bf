import pg from "pg";

// A named statement's rows, described once per connection.
//
// pg asks PostgreSQL to describe the result (Describe → RowDescription) on every execution of a
// prepared statement, then rebuilds the row's field list, its type parsers and an empty row object
// from that description before it reads a single row. For the execute path's statements (the alias
// read's 48 columns, the claiming insert's `returning *`) that was ~6 % of the service's CPU under load
// (docs/benchmarks.md "The fifth round"). A statement prepared on a connection keeps its result type
// there: if a migration would change it, PostgreSQL refuses to run the statement ("cached plan must not
// change result type", which prepared.ts answers with fresh names) rather than answer other columns.
// So the description read with a statement's first execution on a connection holds for every later one
// on that connection, and those skip the Describe; their rows are built by a function made once per
// column list (an object literal with the columns in order, as pg's own rows have them).

interface Field {
  name: string;
  dataTypeID: number;
  format: string;
}

type Parser = (value: string) => unknown;
type RowBuilder = (values: (string | null)[], parsers: Parser[]) => Record<string, unknown>;

interface Shape {
  fields: Field[];
  parsers: Parser[];
  build: RowBuilder;
}

/** pg's private surface this relies on (pg 8.x Query and Result): checked by test/infra. */
interface PgResult {
  fields: Field[];
  _parsers: Parser[] | undefined;
  parseRow(values: (string | null)[]): Record<string, unknown>;
}

interface PgConnection {
  bind(config: {
    portal: string;
    statement: string;
    values: unknown[];
    binary: boolean | undefined;
    valueMapper: (value: unknown) => unknown;
  }): void;
  sync(): void;
}

// biome-ignore lint/suspicious/noExplicitAny: pg's Query class is untyped where this extends it.
const PgQuery = pg.Query as any;
const prepareValue = (pg as unknown as { utils: { prepareValue(value: unknown): unknown } }).utils.prepareValue;

/** Per connection: the shape of each named statement it has described. */
const described = new WeakMap<object, Map<string, Shape>>();

/** Row builders per column list (the same list on every connection shares one). */
const builders = new Map<string, RowBuilder>();

function rowBuilder(names: string[]): RowBuilder {
  const key = JSON.stringify(names);
  let build = builders.get(key);
  if (!build) {
    // Column names go in as JSON string literals: any name is a valid key, none is code. A name given
    // twice keeps its first position and its last value, as pg's rows do.
    const props = names.map((n, i) => `${JSON.stringify(n)}: v[${i}] === null ? null : p[${i}](v[${i}])`);
    build = new Function("v", "p", `return {${props.join(", ")}};`) as RowBuilder;
    builders.set(key, build);
  }
  return build;
}

/** A named pg query that describes its statement only on its first execution on a connection. */
export class DescribedOnceQuery extends PgQuery {
  declare name: string;
  declare values: unknown[];
  declare portal: string;
  declare binary: boolean | undefined;
  declare rows: number | undefined;
  declare _result: PgResult;
  declare _accumulateRows: boolean;
  private shapes: Map<string, Shape> | undefined;

  constructor(config: { name: string; text: string; values: unknown[] }) {
    super(config);
  }

  prepare(connection: PgConnection): void {
    let shapes = described.get(connection);
    if (!shapes) {
      shapes = new Map();
      described.set(connection, shapes);
    }
    this.shapes = shapes;
    const shape = shapes.get(this.name);
    // Not yet described here (or prepared here anew): pg's own Parse / Bind / Describe / Execute.
    if (!shape || !this.hasBeenParsed(connection)) return super.prepare(connection);
    try {
      connection.bind({
        portal: this.portal,
        statement: this.name,
        values: this.values,
        binary: this.binary,
        valueMapper: prepareValue,
      });
    } catch (error) {
      // A value that cannot be sent fails this query only. Unlike pg's own path, the statement is not
      // closed: it was prepared before this query, and closing it would leave pg believing it exists.
      connection.sync();
      this.handleError(error, connection);
      return;
    }
    this.adopt(shape);
    this._getRows(connection, this.rows);
  }

  handleRowDescription(message: { fields: Field[] }): void {
    super.handleRowDescription(message);
    // Text columns only (we never ask for binary): a binary one is left to pg's own rows.
    if (!this.shapes || message.fields.some((f) => f.format !== "text")) return;
    const shape: Shape = {
      fields: message.fields,
      parsers: this._result._parsers ?? [],
      build: rowBuilder(message.fields.map((f) => f.name)),
    };
    this.shapes.set(this.name, shape);
    this.adopt(shape);
  }

  /** Rows of this execution are built with the statement's shape; every row is kept (we have a callback). */
  private adopt(shape: Shape): void {
    this._result.fields = shape.fields;
    this._result._parsers = shape.parsers;
    this._result.parseRow = (values) => shape.build(values, shape.parsers);
    this._accumulateRows = true;
  }
}
