"""Northbound HTTP/JSON API (FastAPI) over a :class:`~controlplane.controller.Controller`.

Why HTTP/JSON and not gRPC: the project's protobuf runtime is pinned to 3.20 by
p4runtime-shell, which would also pin any gRPC northbound's generated code; with
FastAPI the schema (OpenAPI, saved in ``docs/api-openapi.json``) comes for free,
``curl`` is a client, and the job description is JSON anyway.

Errors are ``{"detail": "<field>: <message>", "field": ..., "message": ...}`` with:
400 invalid description, 422 unknown host (or a body that is not a JSON object),
409 duplicate job, 404 unknown job, 507 no room (IDs exhausted or a table full),
503 a switch failed mid-change. Endpoints are plain ``def``: FastAPI runs them in
its thread pool, and the controller serialises changes with its own lock.
"""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import Body, Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controlplane.controller import Controller
from controlplane.entries import TableFullError
from controlplane.limits import MAX_BODY_BYTES, LimitError, TooLargeError
from controlplane.p4rt import P4RuntimeError
from controlplane.planning import POLICIES, UnknownHostError
from controlplane.registry import (
    DuplicateJobError,
    IdsExhaustedError,
    RegistryError,
    RegistryUnavailableError,
    UnknownJobError,
)
from echelon.errors import EchelonError, SpecError

API_VERSION = "1"


class PolicyBody(BaseModel):
    name: str


class ErrorBody(BaseModel):
    """Every error the controller raises on purpose: ``detail`` = ``field: message``."""

    detail: str
    field: str
    message: str


def _err(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "invalid description (field named)",
        401: "missing or wrong bearer token",
        404: "unknown job",
        409: "job ID already registered",
        413: "body, description or job description larger than its limit",
        422: "unknown host, a limit exceeded (job name, micro-batches, flows, ...), "
        "or the body is not a JSON object",
        503: "a switch failed during the change",
        507: "no room: echelon IDs/class slots exhausted or a table full",
    }
    return {c: {"model": ErrorBody, "description": text[c]} for c in codes}


def _status_of(exc: EchelonError) -> int:
    if isinstance(exc, TooLargeError):
        return 413
    if isinstance(exc, UnknownHostError | LimitError):
        return 422
    if isinstance(exc, DuplicateJobError):
        return 409
    if isinstance(exc, UnknownJobError):
        return 404
    if isinstance(exc, IdsExhaustedError | TableFullError):
        return 507
    if isinstance(exc, RegistryUnavailableError):
        return 503
    if isinstance(exc, SpecError | RegistryError):
        return 400
    if isinstance(exc, P4RuntimeError):
        return 503
    return 500


def error_body(exc: EchelonError) -> dict[str, Any]:
    field = str(getattr(exc, "field", "") or getattr(exc, "code", ""))
    message = str(getattr(exc, "message", "") or exc)
    detail = f"{field}: {message}" if field and not str(exc).startswith(field) else str(exc)
    return {"detail": detail, "field": field, "message": message}


def make_app(controller: Controller | None, token: str | None = None) -> FastAPI:
    """The app; ``controller=None`` only builds the schema (for docs/api-openapi.json)."""
    app = FastAPI(
        title="EchelonFlow controller",
        version=API_VERSION,
        description="Register training jobs; the controller installs their EchelonFlow "
        "priorities on the switches over P4Runtime.",
    )

    def auth(request: Request) -> None:
        if token is None:
            return
        # RFC 7235: the scheme is case-insensitive ("bearer" too); the token is
        # compared in constant time
        scheme, _, cred = request.headers.get("authorization", "").partition(" ")
        ok = hmac.compare_digest(cred.strip().encode(), token.encode())
        if scheme.lower() != "bearer" or not ok:
            raise HTTPException(401, "missing or wrong bearer token")

    def ctl() -> Controller:
        if controller is None:
            raise HTTPException(503, "no controller")
        return controller

    @app.exception_handler(EchelonError)
    def _echelon_error(_: Request, exc: EchelonError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=_status_of(exc))

    @app.exception_handler(RequestValidationError)
    def _invalid_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's default echoes the whole input back (52 MB for a 50 MB body):
        name the place and the problem only."""
        errs = exc.errors()
        first = errs[0] if errs else {}
        field = ".".join(str(x) for x in first.get("loc", ("body",)))[:200]
        message = str(first.get("msg", "invalid request"))[:200]
        return JSONResponse(
            {"detail": f"{field}: {message}", "field": field, "message": message},
            status_code=422,
        )

    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)

    deps = [Depends(auth)]

    @app.post(
        "/jobs",
        status_code=201,
        dependencies=deps,
        summary="Register a job",
        responses=_err(400, 401, 409, 413, 422, 503, 507),
    )
    def register(desc: dict[str, Any] = Body(..., examples=[_EXAMPLE])) -> dict[str, Any]:  # noqa: B008
        """A paradigm job description (see echelon.jobs) or an explicit EchelonFlow spec."""
        return ctl().register(desc)

    @app.get("/jobs", dependencies=deps, summary="List registered jobs")
    def list_jobs() -> list[dict[str, Any]]:
        return ctl().jobs()

    @app.get("/jobs/{job_id}", dependencies=deps, summary="Show one job", responses=_err(404))
    def show(job_id: str) -> dict[str, Any]:
        """EchelonFlows, flows and offsets, echelon IDs, classes, levels and ranges."""
        return ctl().show(job_id)

    @app.delete(
        "/jobs/{job_id}", dependencies=deps, summary="Remove a job", responses=_err(404, 503)
    )
    def remove(job_id: str) -> dict[str, Any]:
        ctl().remove(job_id)
        return {"removed": job_id}

    @app.post(
        "/progress",
        dependencies=deps,
        summary="Report a host's progress (online re-planning)",
        responses=_err(400, 401, 404, 422),
    )
    def progress(
        body: dict[str, Any] = Body(..., examples=[_PROGRESS_EXAMPLE]),  # noqa: B008
        wait: bool = False,
    ) -> dict[str, Any]:
        """A snapshot of one host's progress in one iteration of a job: the groups it
        has started sending (``released``) and those whose flows to it have all
        arrived (``finished``). Idempotent; ``seq`` orders snapshots of one
        ``session``. ``wait=true`` answers after the re-plan it caused is written."""
        return ctl().report(body, wait=wait)

    @app.get("/progress", dependencies=deps, summary="Progress state and re-plan measurements")
    def progress_view() -> dict[str, Any]:
        return ctl().progress_view()

    @app.get(
        "/stats",
        dependencies=deps,
        summary="Per-echelon counters and unprioritized packets by reason",
    )
    def stats() -> dict[str, Any]:
        return ctl().stats()

    @app.get("/status", dependencies=deps, summary="Switches, pipeline and entry counts")
    def status() -> dict[str, Any]:
        return ctl().status()

    @app.get("/policy", dependencies=deps, summary="Current policy")
    def get_policy() -> dict[str, Any]:
        return {"policy": ctl().policy, "available": list(POLICIES)}

    @app.put(
        "/policy",
        dependencies=deps,
        summary="Switch policy at run time",
        responses=_err(400, 503, 507),
    )
    def set_policy(body: PolicyBody) -> dict[str, Any]:
        ctl().set_policy(body.name)
        return {"policy": ctl().policy, "available": list(POLICIES)}

    return app


class BodyLimit:
    """ASGI middleware: a request body above ``limit`` bytes is answered 413 without
    being read further: at once by Content-Length, or, for a streamed body, by
    ending the body early and replacing whatever the app answers to the stub."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            for msg in self._refusal(int(declared)):
                await send(msg)
            return
        seen = 0
        over = False

        async def limited() -> Message:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    over = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return msg

        async def replacing(msg: Message) -> None:
            if not over:
                await send(msg)
            elif msg["type"] == "http.response.start":
                for out in self._refusal(seen):
                    await send(out)

        await self.app(scope, limited, replacing)

    def _refusal(self, size: int) -> list[Message]:
        message = f"{size} bytes or more exceed the limit of {self.limit}"
        body = JSONResponse(
            {"detail": f"body: {message}", "field": "body", "message": message}, status_code=413
        )
        return [
            {"type": "http.response.start", "status": 413, "headers": body.raw_headers},
            {"type": "http.response.body", "body": body.body},
        ]


_PROGRESS_EXAMPLE: dict[str, Any] = {
    "job": "j1",
    "host": "h4",
    "iteration": 0,
    "session": "5f1c2a",
    "seq": 3,
    "released": [],
    "finished": ["grads"],
}

_EXAMPLE: dict[str, Any] = {
    "job": "j1",
    "echelonflows": [
        {
            "group": "grads",
            "flows": [
                {"src": "h1", "dst": "h4", "size": 100000, "offset": 0.0},
                {"src": "h2", "dst": "h4", "size": 100000, "offset": 0.002},
            ],
        }
    ],
}
