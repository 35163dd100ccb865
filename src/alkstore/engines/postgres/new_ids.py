"""Ids of rows the database makes itself (dead-letter copies, redriven jobs, published jobs).

They are UUIDv7s as the client's (:mod:`alkstore.core.ids`), so that they keep time order
among the others: the first 48 bits the milliseconds of the database's clock, the rest
random. Built from ``gen_random_uuid()`` (its version nibble turned from 4 to 7) and the
clock, which every supported server has (``uuidv7()`` only arrives in PostgreSQL 18).
"""

NEW_ID = """encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
        substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid"""
"""A SQL expression: a fresh UUIDv7 (its 6 time bytes replace the random ones; bits 52 and
53, counted from the right of each byte as ``set_bit`` does, make the version 0111)."""
