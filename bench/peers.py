"""The peers of `basalt bench`: DuckDB and SQLite's JSON functions on the same data.

`basalt bench` generates the data, knows the queries and their answers, and runs this
script as a subprocess: the plan comes as JSON on stdin (files, SQL, runs), the timings
and answers go back as JSON on stdout, and the Rust side checks every answer and makes
the report. Keeping the generators, the SQL and the checks in one place (the Rust
workload files) means the peers cannot drift from Basalt's queries; Python is here only
because it is the engines' most common client.

SQL templates: `$table` is the table, `$(a.b)` the value at path a.b of a document,
`$doc` the whole document. DuckDB loads the NDJSON with `read_json` into typed columns
(nested objects become structs); SQLite keeps each line as TEXT and reads it with
`json_extract`, which is what "SQLite JSON" means here.

Progress goes to stderr. Run by hand: `python bench/peers.py < plan.json`.
"""

import json
import os
import re
import sqlite3
import sys
import time

PATH = re.compile(r"\$\(([A-Za-z0-9_.]+)\)")


def log(message):
    print(f"peers: {message}", file=sys.stderr, flush=True)


class DuckDB:
    name = "duckdb"

    def __init__(self, workdir, threads):
        import duckdb

        self.version = duckdb.__version__
        self.threads = threads
        self.db = duckdb.connect(os.path.join(workdir, "peer.duckdb"))
        self.db.execute(f"SET threads = {threads}")

    def sql(self, template, table):
        def path(match):
            first, *rest = match.group(1).split(".")
            return f'"{first}"' + "".join(f"['{part}']" for part in rest)

        text = PATH.sub(path, template)
        return text.replace("$table", table).replace("$doc", "*")

    def load(self, table, path):
        self.db.execute(f"DROP TABLE IF EXISTS {table}")
        self.db.execute(
            f"CREATE TABLE {table} AS SELECT * FROM "
            f"read_json('{path}', format = 'newline_delimited')"
        )

    def query(self, sql):
        return self.db.execute(sql).fetchall()


class SQLite:
    name = "sqlite"

    def __init__(self, workdir, threads):
        self.version = sqlite3.sqlite_version
        # SQLite runs a query on one thread, whatever the machine has.
        self.threads = 1
        path = os.path.join(workdir, "peer.sqlite")
        if os.path.exists(path):
            os.remove(path)
        self.db = sqlite3.connect(path, isolation_level=None)
        # A bulk load into a scratch database: no journal, no waiting for the disk.
        self.db.execute("PRAGMA journal_mode = OFF")
        self.db.execute("PRAGMA synchronous = OFF")

    def sql(self, template, table):
        text = PATH.sub(lambda m: f"json_extract(doc, '$.{m.group(1)}')", template)
        return text.replace("$table", table).replace("$doc", "doc")

    def load(self, table, path):
        self.db.execute(f"DROP TABLE IF EXISTS {table}")
        self.db.execute(f"CREATE TABLE {table} (doc TEXT)")
        self.db.execute("BEGIN")
        with open(path, encoding="utf-8") as lines:
            self.db.executemany(
                f"INSERT INTO {table} (doc) VALUES (?)",
                ((line,) for line in lines if line.strip()),
            )
        self.db.execute("COMMIT")

    def query(self, sql):
        return self.db.execute(sql).fetchall()


ENGINES = {"duckdb": DuckDB, "sqlite": SQLite}


def plain(value):
    """A cell as JSON knows it (DuckDB returns HUGEINT sums as int, DECIMAL as Decimal)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def answer(rows, count_rows):
    if count_rows:
        return {"count": len(rows)}
    return [[plain(v) for v in row] for row in rows]


def run_query(engine, table, query, runs, budget_s):
    variants = [v for v in query["variants"] if v["sql"] is not None]
    times, answers = [], [None] * len(variants)
    started = time.perf_counter()
    for i in range(max(runs, len(variants), 1)):
        index = i % len(variants)
        variant = variants[index]
        sql = engine.sql(variant["sql"], table)
        t0 = time.perf_counter()
        rows = engine.query(sql)
        times.append(time.perf_counter() - t0)
        if answers[index] is None:
            answers[index] = answer(rows, variant["count_rows"])
        if time.perf_counter() - started > budget_s:
            break
    return {"times_s": times, "answers": answers}


def run_engine(engine, plan):
    datasets = {}
    for dataset in plan["datasets"]:
        table = dataset["name"]
        log(f"{engine.name}: loading {table} ({dataset['docs']} documents)")
        t0 = time.perf_counter()
        engine.load(table, dataset["file"])
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for statement in dataset["setup"]:
            engine.query(engine.sql(statement, table))
        setup_s = time.perf_counter() - t0
        queries = {}
        for query in dataset["queries"]:
            if not any(v["sql"] is not None for v in query["variants"]):
                continue
            log(f"{engine.name}: {table} {query['name']}")
            try:
                queries[query["name"]] = run_query(
                    engine, table, query, plan["runs"], plan["budget_s"]
                )
            except Exception as e:  # an engine's refusal is a result, not a crash
                queries[query["name"]] = {"error": f"{type(e).__name__}: {e}"}
        datasets[table] = {"load_s": load_s, "setup_s": setup_s, "queries": queries}
    return datasets


def main():
    plan = json.load(sys.stdin)
    result = {"python": sys.version.split()[0], "engines": {}, "unavailable": {}}
    for name in plan["engines"]:
        try:
            engine = ENGINES[name](plan["workdir"], plan["threads"])
        except Exception as e:
            result["unavailable"][name] = f"{type(e).__name__}: {e}"
            continue
        result["engines"][name] = {
            "version": engine.version,
            "threads": engine.threads,
            "datasets": run_engine(engine, plan),
        }
        engine.db.close()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
