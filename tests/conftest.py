"""Fixtures for every test package: the real services (PostgreSQL, Redis) the cluster tests
use."""

from tests.services import pg_schema, redis_prefix

__all__ = ["pg_schema", "redis_prefix"]
