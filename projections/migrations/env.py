"""Alembic environment: migrates the projection tables of one database."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from domain.store_config import database_url, sqlalchemy_url
from projections.tables import metadata

config = context.config
url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url") or database_url()
url = sqlalchemy_url(url)


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(url)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
