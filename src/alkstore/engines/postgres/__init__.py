"""The reference engine: stock PostgreSQL (13+)."""

from .engine import PostgresEngine

__all__ = ["PostgresEngine"]
