"""A FastAPI app that enqueues inside its request's transaction, and a worker beside it.

``POST /orders`` inserts the order and sends its confirmation e-mail job in one transaction
on a connection from the app's own pool (``store.using(conn)``): an order that fails
validation after the insert rolls back, and its job with it; a committed order always has
its job. The worker (``store.work``, tasks on the app's event loop) "sends" each e-mail and
marks the order, in the job's own transaction (``transactional=True``).

The transaction is a ``yield`` dependency with ``scope="function"``: FastAPI ends it when the
endpoint returns, **before** the response is sent, so a client that gets 201 finds the order
and its job committed, and a commit that fails is answered 503 instead. (Without the scope, a
``yield`` dependency ends after the response has gone: the client can look before the commit,
and a failed commit is never reported. docs/frameworks.md says more.)

Run it with ``SHOP_DSN=postgresql://… uvicorn fastapi_shop:app`` (from this directory);
tests/test_fastapi_recipe.py serves it with uvicorn and talks to it over HTTP.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import psycopg
from fastapi import Depends, FastAPI, HTTPException, Request
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

import alkstore

SCHEMA = "shop"
QUEUE = "confirmations"


class Order(BaseModel):
    """What a client posts."""

    email: str
    item: str


async def send_confirmation(job: alkstore.Job, ctx: Any) -> dict[str, bool]:
    """The worker's handler: runs inside the job's transaction on ``ctx.connection``."""
    # A real app would call its mail service here.
    await ctx.connection.execute(
        "UPDATE shop_order SET confirmed = true WHERE id = %s", (job.data["order"],)
    )
    return {"sent": True}


async def transaction(request: Request) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A connection of the app's pool, in a transaction for the request: rolled back when the
    endpoint raises, committed when it returns, before the response is sent (the scope of
    :data:`Conn`); a commit that fails is answered 503 and nothing was saved."""
    async with request.app.state.pool.connection() as conn:
        yield conn  # the endpoint runs here; an exception it raises rolls back
        try:
            await conn.commit()
        except psycopg.Error as exc:  # e.g. a deferred constraint, a serialization failure
            raise HTTPException(503, "not saved: the transaction did not commit") from exc


Conn = Annotated[psycopg.AsyncConnection[Any], Depends(transaction, scope="function")]
"""An endpoint parameter: the request's connection, committed before the response is sent."""


def create_app(dsn: str) -> FastAPI:
    """The app on the database at ``dsn``."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            AsyncConnectionPool(dsn, open=False) as pool,
            alkstore.connect_async(dsn, schema=SCHEMA) as store,
        ):
            async with pool.connection() as conn:
                await conn.execute(
                    """CREATE TABLE IF NOT EXISTS shop_order (
                        id uuid PRIMARY KEY, email text NOT NULL, item text NOT NULL,
                        confirmed bool NOT NULL DEFAULT false)"""
                )
            await store.create_queue(QUEUE, exist_ok=True, retry_limit=3)
            app.state.pool, app.state.store = pool, store
            async with await store.work(QUEUE, send_confirmation, transactional=True):
                yield  # the app serves requests; leaving stops the worker gracefully

    app = FastAPI(lifespan=lifespan)

    @app.post("/orders", status_code=201)
    async def place_order(order: Order, request: Request, conn: Conn) -> dict[str, str]:
        order_id = uuid.uuid4()
        await conn.execute(
            "INSERT INTO shop_order (id, email, item) VALUES (%s, %s, %s)",
            (order_id, order.email, order.item),
        )
        store: alkstore.AsyncStore = request.app.state.store
        job = await store.using(conn).send(QUEUE, {"order": str(order_id), "to": order.email})
        if "@" not in order.email:  # found out after the writes: both roll back
            raise HTTPException(422, f"not an e-mail address: {order.email!r}")
        return {"order": str(order_id), "job": str(job)}

    @app.get("/orders/{order_id}")
    async def get_order(order_id: uuid.UUID, conn: Conn) -> dict[str, Any]:
        cur = await conn.execute(
            "SELECT email, item, confirmed FROM shop_order WHERE id = %s", (order_id,)
        )
        row = await cur.fetchone()
        if row is None:
            raise HTTPException(404, "no such order")
        return {"email": row[0], "item": row[1], "confirmed": row[2]}

    return app


if "SHOP_DSN" in os.environ:
    app = create_app(os.environ["SHOP_DSN"])
