"""The peers of `basalt bench`: DuckDB, SQLite's JSON functions and PostgreSQL jsonb on
the same data.

`basalt bench` generates the data, knows the queries and their answers, and runs this
script as a subprocess: the plan comes as JSON on stdin (files, SQL, runs), the timings
and answers go back as JSON on stdout, and the Rust side checks every answer and makes
the report. Keeping the generators, the SQL and the checks in one place (the Rust
workload files) means the peers cannot drift from Basalt's queries; Python is here only
because it is the engines' most common client.

SQL templates: `$table` is the table, `$(a.b)` the value at path a.b of a document,
`$doc` the whole document. DuckDB loads the NDJSON with `read_json` into typed columns
(nested objects become structs); SQLite keeps each line as TEXT and reads it with
`json_extract`, which is what "SQLite JSON" means here. PostgreSQL keeps each line as
a `jsonb` value loaded with COPY and reads it with `#>>`, cast to the type the data holds
at that path; it is the server on 127.0.0.1:5432 when one lets us in, else a private one
started from the PostgreSQL binaries on PATH in a temporary directory, on a free
loopback port, and stopped at the end.

Progress goes to stderr. Run by hand: `python bench/peers.py < plan.json`.
"""

import glob
import itertools
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
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

    def close(self):
        self.db.close()


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

    def close(self):
        self.db.close()


class PrivatePostgres:
    """A throwaway PostgreSQL server: initdb in a temporary directory, a free loopback
    port, trust authentication, stopped and removed by `stop`. initdb refuses to run as
    root, so as root the server runs as the `postgres` user."""

    def __init__(self, threads):
        # Debian keeps the server binaries off PATH, one directory per major version.
        search = os.pathsep.join(
            [
                os.environ.get("PATH", ""),
                *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True),
            ]
        )
        self.bin = {name: shutil.which(name, path=search) for name in ("initdb", "pg_ctl")}
        missing = [name for name, path in self.bin.items() if path is None]
        if missing:
            raise RuntimeError(f"no PostgreSQL server reachable and no {missing[0]} on PATH")
        self.as_user = []
        self.dir = tempfile.mkdtemp(prefix="basalt-bench-pg-")
        if os.geteuid() == 0:
            import pwd

            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.dir, "data")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        try:
            self.start(threads)
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def start(self, threads):
        self.run(
            self.bin["initdb"],
            "-D",
            self.data,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": self.port,
            "unix_socket_directories": self.dir,
            # Room for a bulk load without checkpoints in the middle of it.
            "shared_buffers": "512MB",
            "max_wal_size": "8GB",
            "work_mem": "64MB",
            "max_parallel_workers_per_gather": threads,
        }
        options = " ".join(f"-c {key}={value}" for key, value in settings.items())
        self.run(
            self.bin["pg_ctl"],
            "-D",
            self.data,
            "-l",
            os.path.join(self.dir, "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )

    def run(self, *command):
        done = subprocess.run([*self.as_user, *command], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{os.path.basename(command[0])} failed: {done.stderr.strip()}")

    def stop(self):
        try:
            self.run(self.bin["pg_ctl"], "-D", self.data, "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class PostgreSQL:
    name = "postgres"
    database = "basalt_bench"

    def __init__(self, workdir, threads):
        import psycopg

        self.psycopg = psycopg
        self.threads = threads
        self.private = None
        self.db = None
        self.types = {}
        try:
            admin = psycopg.connect(
                host="127.0.0.1", port=5432, dbname="postgres", autocommit=True, connect_timeout=3
            )
            where = "127.0.0.1:5432"
        except psycopg.OperationalError:
            self.private = PrivatePostgres(threads)
            admin = psycopg.connect(
                host="127.0.0.1",
                port=self.private.port,
                user="postgres",
                dbname="postgres",
                autocommit=True,
            )
            where = f"a private server on 127.0.0.1:{self.private.port}"
        log(f"postgres: {where}")
        try:
            self.connect(admin, threads)
        except BaseException:
            self.close()
            raise

    def connect(self, admin, threads):
        with admin:
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)
            ).fetchone()
            if not exists:
                admin.execute(f"CREATE DATABASE {self.database}")
            server = {"host": admin.info.host, "port": admin.info.port, "user": admin.info.user}
        self.db = self.psycopg.connect(**server, dbname=self.database, autocommit=True)
        self.version = self.db.execute("SHOW server_version").fetchone()[0]
        self.db.execute(f"SET max_parallel_workers_per_gather = {threads}")

    def sql(self, template, table):
        def path(match):
            name = match.group(1)
            text = "(doc #>> '{" + name.replace(".", ",") + "}')"
            cast = self.types.get(table, {}).get(name)
            return f"({text}::{cast})" if cast else text

        text = PATH.sub(path, template)
        return text.replace("$table", table).replace("$doc", "doc")

    def load(self, table, path):
        self.types[table] = sample_types(path)
        self.db.execute(f"DROP TABLE IF EXISTS {table}")
        self.db.execute(f"CREATE TABLE {table} (doc jsonb)")
        # CSV with quote and delimiter bytes that JSON text never holds: every line
        # reaches jsonb as it is (the text format would unescape its backslashes).
        copy_sql = (
            f"COPY {table} (doc) FROM STDIN WITH (FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')"
        )
        with open(path, "rb") as lines, self.db.cursor().copy(copy_sql) as copy:
            while block := lines.read(1 << 20):
                copy.write(block)
        self.db.execute(f"ANALYZE {table}")

    def query(self, sql):
        cursor = self.db.execute(sql)
        # Statements without rows (CREATE INDEX) have no description.
        return cursor.fetchall() if cursor.description else []

    def close(self):
        if self.db is not None:
            self.db.close()
        if self.private is not None:
            self.private.stop()


def sample_types(path, lines=1000):
    """The PostgreSQL type of each path's values in the first lines of an NDJSON file:
    `#>>` gives text, which must be cast back for arithmetic and numeric comparison."""
    seen = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}{key}.", inner)
            return
        kind = {bool: "boolean", int: "bigint", float: "float8"}.get(type(value))
        if value is not None:
            seen.setdefault(prefix[:-1], set()).add(kind)

    with open(path, encoding="utf-8") as sample:
        for line in itertools.islice(sample, lines):
            if line.strip():
                walk("", json.loads(line))
    types = {}
    for name, kinds in seen.items():
        if kinds <= {"bigint", "float8"}:
            types[name] = "float8" if "float8" in kinds else "bigint"
        elif kinds == {"boolean"}:
            types[name] = "boolean"
    return types


ENGINES = {"duckdb": DuckDB, "sqlite": SQLite, "postgres": PostgreSQL}


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
        try:
            result["engines"][name] = {
                "version": engine.version,
                "threads": engine.threads,
                "datasets": run_engine(engine, plan),
            }
        finally:
            engine.close()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
