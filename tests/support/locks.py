"""Locks taken from outside hookinbox, to make its database slow on purpose."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa


@contextmanager
def lock_held(database_url: str) -> Iterator[None]:
    """Hold the lock every insert of a delivery waits for, from a connection of our own."""
    if database_url.startswith("sqlite"):
        connection = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            connection.execute("ROLLBACK")
            connection.close()
        return
    if database_url.startswith("mysql"):
        engine = sa.create_engine(database_url.replace("mysql://", "mysql+pymysql://", 1))
        try:
            with engine.connect() as connection:
                # A table lock (metadata): every other session's insert waits for it.
                connection.exec_driver_sql("LOCK TABLES hookinbox_events WRITE")
                try:
                    yield
                finally:
                    connection.exec_driver_sql("UNLOCK TABLES")
        finally:
            engine.dispose()
        return
    url = database_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection, connection.begin() as transaction:
            connection.exec_driver_sql("LOCK TABLE hookinbox_events IN ACCESS EXCLUSIVE MODE")
            yield
            transaction.rollback()
    finally:
        engine.dispose()
