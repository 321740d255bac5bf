import pg from "pg";
import { objectLiteralFunction } from "../kernel/object-literal.js";

// Rows of a named statement, built the same way on every execution.
//
// On every execution of a prepared statement pg reads PostgreSQL's description of the result
// (RowDescription), then rebuilds the row's type parsers and an empty row object from it, key by key
// into a dictionary-mode object, before it reads a single row; each row is then a copy of that object
// filled key by key. For the execute path's statements (the alias read's 48 columns, the claiming
// insert's `returning *`) that was ~6 % of the service's CPU under load (docs/benchmarks.md "The sixth
// round"). Here the description PostgreSQL sends is still read every time, and compared with the one
// the statement had before: when it is the same (names, types, formats), the parsers and a row builder
// made for it once are used again. The builder is a function that returns an object literal with the
// columns in order, as pg's own rows have them. A changed description (a migration, or a pooler that
// prepared the statement again on another server connection) simply makes a new shape: nothing here
// trusts a shape the server did not just confirm.

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

// biome-ignore lint/suspicious/noExplicitAny: pg's Query class is untyped where this extends it.
const PgQuery = pg.Query as any;

/** The last shape seen per statement name (names are per text: prepared.ts). */
const shapes = new Map<string, Shape>();

/** Row builders per column list (statements with the same columns share one). */
const builders = new Map<string, RowBuilder>();

function rowBuilder(names: string[]): RowBuilder {
  const key = JSON.stringify(names);
  let build = builders.get(key);
  if (!build) {
    // A name given twice keeps its first position and its last value, as pg's rows do.
    build = objectLiteralFunction<RowBuilder>(
      ["v", "p"],
      names.map((n, i) => [n, `v[${i}] === null ? null : p[${i}](v[${i}])`]),
    );
    builders.set(key, build);
  }
  return build;
}

function sameFields(a: Field[], b: Field[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.name !== y.name || x.dataTypeID !== y.dataTypeID || x.format !== y.format) return false;
  }
  return true;
}

/** A named pg query whose rows are built from the statement's shape when PostgreSQL confirms it. */
export class ShapedQuery extends PgQuery {
  declare name: string;
  declare values: unknown[];
  declare _result: PgResult;
  declare _accumulateRows: boolean;

  constructor(config: { name: string; text: string; values: unknown[] }) {
    // Given an object, pg copies it descriptor by descriptor first (its cloneQueryConfig: a few µs a
    // statement, ~50 µs of a paid execute's main thread in CPU profiles); given the text, it copies
    // nothing, and the name and values are set as its constructor would set them.
    super(config.text);
    this.name = config.name;
    this.values = config.values;
  }

  handleRowDescription(message: { fields: Field[] }): void {
    const known = shapes.get(this.name);
    // pg's own handler would also split a multi-statement result; a named statement is one statement.
    if (known && sameFields(known.fields, message.fields)) {
      this.adopt(known);
      return;
    }
    super.handleRowDescription(message);
    // Text columns only (we never ask for binary): a binary one is left to pg's own rows.
    if (message.fields.some((f) => f.format !== "text")) return;
    const shape: Shape = {
      fields: message.fields,
      parsers: this._result._parsers ?? [],
      build: rowBuilder(message.fields.map((f) => f.name)),
    };
    shapes.set(this.name, shape);
    this.adopt(shape);
  }

  /** This execution's rows are built with the shape; every row is kept (we always pass a callback). */
  private adopt(shape: Shape): void {
    this._result.fields = shape.fields;
    this._result._parsers = shape.parsers;
    this._result.parseRow = (values) => shape.build(values, shape.parsers);
    this._accumulateRows = true;
  }
}
