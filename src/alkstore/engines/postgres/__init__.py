"""The reference engine: stock PostgreSQL (13+)."""

from .engine import POSTGRES, PostgresEngine

__all__ = ["POSTGRES", "PostgresEngine"]
