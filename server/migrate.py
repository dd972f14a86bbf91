"""`python -m server.migrate` (also `noughts migrate`): bring a database's schema up to date.

Opening a store migrates it (SQLite and PostgreSQL share one numbered sequence of schema
versions); this command does only that, for operators who upgrade the schema before they
start the new servers, as a deploy step. It holds the database's server lock meanwhile, so
it is refused while a server alone uses the database: on SQLite the file's lock
(server/lockfile.py); on PostgreSQL the advisory lock held shared, as a cluster's node holds
it (server/pgstore.py), so it runs beside a cluster's nodes, where a node of the new version
starting would migrate the schema just the same (a rolling upgrade).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    from engine.command_line import CommandParser

    parser = CommandParser(
        prog="noughts migrate",
        description="Create or upgrade the schema of a noughts database, then exit. A SQLite "
        "file must hold a database already (noughts serve makes one).",
    )
    from server.settings import database

    # $NOUGHTS_DB as the default text: argparse checks it as it checks the command line's.
    parser.add_argument(
        "--db",
        type=database,
        default=os.environ.get("NOUGHTS_DB"),
        help="a SQLite file or a postgresql:// URL (default: $NOUGHTS_DB or noughts.db in "
        "your user data directory)",
    )
    return parser


async def run(db: str) -> int:
    from protocol.paths import no_database
    from server.__main__ import open_store
    from server.errors import ServerError
    from server.lockfile import DatabaseInUse, ServerLock
    from server.pgstore import PG_SCHEMA_VERSION, PostgresStore, is_postgres_url
    from server.store import SCHEMA_VERSION

    if not is_postgres_url(db) and (missing := no_database(db)):
        # (opening it made a new database there: a mistyped path was "up to date")
        print(f"noughts migrate: {missing}: nothing to migrate", file=sys.stderr)
        return 1
    lock = None
    store = PostgresStore(db, shared=True) if is_postgres_url(db) else open_store(db)
    try:
        if not is_postgres_url(db):  # (PostgresStore holds the advisory lock, shared)
            # A server's lock: no schema change under a running server (one still on the
            # old schema would write rows the migration did not see), nor one starting.
            lock = ServerLock.acquire(db)
        await store.open()
    except DatabaseInUse as exc:
        print(
            f"noughts migrate: database {db} is being served by a noughts server "
            f"({exc.holder}); stop it, then migrate: a schema must not change under its server",
            file=sys.stderr,
        )
        return 1
    except ServerError as exc:
        print(f"noughts migrate: {exc}", file=sys.stderr)
        return 1
    else:
        await store.close()
    finally:
        if lock is not None:
            lock.release()
    found = store.schema_found
    now = PG_SCHEMA_VERSION if is_postgres_url(db) else SCHEMA_VERSION
    if found == 0:  # (a PostgreSQL schema with no tables yet)
        print(f"{store.describe()}: schema created (version {now})")
    elif found is not None and found < now:
        print(f"{store.describe()}: schema migrated from version {found} to {now}")
    else:
        print(f"{store.describe()}: schema up to date")
    return 0


def main(argv: list[str] | None = None) -> int:
    from server.store import default_db_path

    args = build_parser().parse_args(argv)
    db = args.db or str(default_db_path())
    return asyncio.run(run(db))


if __name__ == "__main__":
    sys.exit(main())
