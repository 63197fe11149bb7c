"""Northbound HTTP/JSON API (FastAPI) over a :class:`~controlplane.controller.Controller`.

Why HTTP/JSON and not gRPC: with FastAPI the schema (OpenAPI, saved in
``docs/api-openapi.json``) comes for free, ``curl`` is a client, and the job
description is JSON anyway; a gRPC northbound would add generated code to keep in
step with the protobuf runtime the P4Runtime bindings (finsy's) already fix.

Bodies and answers are typed: a registration is one of the core's models
(``echelon.jobs.description_models``: one per paradigm, and the explicit spec),
answers are :mod:`controlplane.apimodels`; both are in the published schema.
Bodies are read as JSON whatever ``Content-Type`` the client claims (``curl -d
@job.json`` sends a form type), and validated by the core's one parser, so the
API, ``echelon show`` and the controller refuse the same things with the same
words.

Every error, 4xx or 5xx, is ``{"detail": "<field>: <message>", "field": ...,
"message": ...}`` (:class:`~controlplane.apimodels.ErrorBody`), never FastAPI's
``{"detail": [...]}``: 400 invalid description, 422 unknown host, a limit
exceeded, or a body that is not a JSON object, 409 duplicate job, 404 unknown
job, 507 no room (IDs exhausted or a table full), 503 a switch failed
mid-change. Endpoints are plain ``def``: FastAPI runs them in its thread pool,
and the controller serialises changes with its own lock.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controlplane.apimodels import (
    ErrorBody,
    JobSummary,
    JobView,
    PlanView,
    PolicyBody,
    PolicyView,
    ProgressReply,
    ProgressView,
    QueueResetView,
    Removed,
    StatsView,
    StatusView,
)
from controlplane.controller import Controller
from controlplane.entries import TableFullError
from controlplane.limits import MAX_BODY_BYTES, LimitError, TooLargeError
from controlplane.planning import POLICIES
from controlplane.queues import reset_max
from controlplane.registry import (
    DuplicateJobError,
    IdsExhaustedError,
    RegistryUnavailableError,
    UnknownJobError,
)
from echelon.errors import EchelonError, SpecError, UnknownHostError
from echelon.jobs import description_models
from echelon.progress import ReportBody
from echelon.specs import validate
from p4client.p4rt import P4RuntimeError

API_VERSION = "1"
#: Characters of an error's ``detail`` at most.
MAX_DETAIL = 1000


def _err(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "invalid description (field named)",
        401: "missing or wrong bearer token",
        404: "unknown job",
        409: "job ID already registered",
        405: "method not allowed on this path",
        413: "body, description or job description larger than its limit",
        422: "unknown host, a limit exceeded (job name, micro-batches, flows, ...), "
        "or the body is not a JSON object",
        503: "a switch failed during the change",
        507: "no room: echelon IDs/class slots exhausted or a table full",
    }
    return {c: {"model": ErrorBody, "description": text[c]} for c in codes}


class BodyError(SpecError):
    """The body is not JSON, or not the JSON type the endpoint takes (HTTP 422)."""


def _status_of(exc: EchelonError) -> int:
    if isinstance(exc, BodyError):
        return 422
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
    if isinstance(exc, SpecError):
        return 400
    if isinstance(exc, P4RuntimeError):
        return 503
    return 500


def _printable(text: str) -> str:
    """Text safe to encode as UTF-8: a lone surrogate a client sent (in a field
    name, echoed back) is escaped instead of failing the answer with a 500."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(exc: EchelonError) -> dict[str, Any]:
    field = str(getattr(exc, "field", "") or getattr(exc, "code", ""))
    message = str(getattr(exc, "message", "") or exc)
    detail = f"{field}: {message}" if field and not str(exc).startswith(field) else str(exc)
    return plain_error(field, message, detail)


def plain_error(field: str, message: str, detail: str | None = None) -> dict[str, Any]:
    """The one error body (:class:`ErrorBody`)."""
    field, message = _printable(field)[:200], _printable(message)[:500]
    # never echo a large input back (a 422 used to carry up to 400 KB of it)
    detail = _printable(detail)[:MAX_DETAIL] if detail is not None else f"{field}: {message}"
    return {"detail": detail, "field": field, "message": message}


async def json_body(request: Request) -> Any:
    """The request body as JSON, whatever ``Content-Type`` says (a form type from
    ``curl -d``, none, text/plain): the API only ever takes JSON."""
    raw = await request.body()
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # also ints beyond 4300 digits
        raise BodyError("body", f"not valid JSON: {str(exc)[:200]}") from None


def _body_doc(*models: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` declaring a JSON body of one of ``models`` (components added
    by :func:`make_app`'s schema)."""
    refs = [{"$ref": f"#/components/schemas/{m.__name__}"} for m in models]
    schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def make_app(controller: Controller | None, token: str | None = None) -> FastAPI:
    """The app; ``controller=None`` only builds the schema (for docs/api-openapi.json)."""
    if token is not None and (not token.strip() or token != token.strip()):
        # an empty token made a bare "Authorization: Bearer" pass
        raise EchelonError("token: must be non-empty, without surrounding spaces")
    guarded = token is not None  # then the schema and docs pages need the token too

    def auth(request: Request) -> None:
        if token is None:
            return
        # RFC 7235: the scheme is case-insensitive ("bearer" too); the token is
        # compared in constant time
        scheme, _, cred = request.headers.get("authorization", "").partition(" ")
        ok = hmac.compare_digest(cred.strip().encode(), token.encode())
        if scheme.lower() != "bearer" or not ok:
            raise HTTPException(401, "missing or wrong bearer token")

    app = FastAPI(
        # every endpoint needs the token (the schema and docs pages: _guarded_docs)
        dependencies=[Depends(auth)],
        title="EchelonFlow controller",
        version=API_VERSION,
        description="Register training jobs; the controller installs their EchelonFlow "
        "priorities on the switches over P4Runtime.",
        docs_url=None if guarded else "/docs",
        redoc_url=None if guarded else "/redoc",
        openapi_url=None if guarded else "/openapi.json",
    )

    def ctl() -> Controller:
        if controller is None:
            raise HTTPException(503, "no controller")
        return controller

    @app.exception_handler(EchelonError)
    def _echelon_error(_: Request, exc: EchelonError) -> JSONResponse:
        return JSONResponse(error_body(exc), status_code=_status_of(exc))

    @app.exception_handler(RequestValidationError)
    def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's default echoes the whole input back (52 MB for a 50 MB body) in
        another shape: name the place and the problem only, in the one error body."""
        errs = exc.errors()
        first = errs[0] if errs else {}
        field = ".".join(str(x) for x in first.get("loc", ("body",)))
        message = str(first.get("msg", "invalid request"))
        return JSONResponse(plain_error(field, message), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """401, 404 of an unknown path, 405, ...: the same error body as the rest."""
        field = {401: "authorization", 404: "path", 405: "method"}.get(exc.status_code, "")
        if exc.status_code == 404 and exc.detail == "Not Found":
            message = f"no such endpoint: {request.url.path}"
        else:
            message = str(exc.detail)
        return JSONResponse(
            plain_error(field, message),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)

    @app.post(
        "/jobs",
        status_code=201,
        summary="Register a job",
        response_model=JobView,
        response_model_exclude_unset=True,
        responses=_err(400, 401, 409, 413, 422, 503, 507),
        openapi_extra=_body_doc(*description_models()),
    )
    async def register(request: Request) -> Any:
        """A paradigm job description (see echelon.jobs) or an explicit EchelonFlow spec.
        The answer is the job as ``GET /jobs/{job}`` shows it, plus ``warnings``."""
        desc = await json_body(request)
        if not isinstance(desc, dict):
            raise BodyError("body", f"must be a JSON object, got {type(desc).__name__}")
        return await run_in_threadpool(ctl().register, desc)

    @app.post(
        "/plan",
        summary="What registering a job would install (a dry run)",
        response_model=PlanView,
        response_model_exclude_unset=True,
        responses=_err(400, 401, 409, 413, 422, 503),
        openapi_extra=_body_doc(*description_models()),
    )
    async def plan(request: Request) -> Any:
        """The body of ``POST /jobs``, planned by the same planner with every registered
        job, then undone: the levels and ranges its registration would install now, and
        the registered groups whose plan it would change. Nothing is registered."""
        desc = await json_body(request)
        if not isinstance(desc, dict):
            raise BodyError("body", f"must be a JSON object, got {type(desc).__name__}")
        return await run_in_threadpool(ctl().plan_registration, desc)

    @app.get(
        "/jobs",
        summary="List registered jobs",
        response_model=list[JobSummary],
        response_model_exclude_unset=True,
        responses=_err(401),
    )
    def list_jobs() -> Any:
        return ctl().jobs()

    @app.get(
        "/jobs/{job_id}",
        summary="Show one job",
        response_model=JobView,
        response_model_exclude_unset=True,
        responses=_err(401, 404),
    )
    def show(job_id: str) -> Any:
        """EchelonFlows, flows and offsets, echelon IDs, classes, levels and ranges."""
        return ctl().show(job_id)

    @app.delete(
        "/jobs/{job_id}",
        summary="Remove a job",
        response_model=Removed,
        responses=_err(401, 404, 503),
    )
    def remove(job_id: str) -> Any:
        ctl().remove(job_id)
        return {"removed": job_id}

    @app.post(
        "/progress",
        summary="Report a host's progress (online re-planning)",
        response_model=ProgressReply,
        response_model_exclude_unset=True,
        responses=_err(400, 401, 404, 422),
        openapi_extra=_body_doc(ReportBody),
    )
    async def progress(request: Request, wait: bool = False) -> Any:
        """A snapshot of one host's progress in one iteration of a job: the groups it
        has started sending (``released``) and those whose flows to it have all
        arrived (``finished``). Idempotent; ``seq`` orders snapshots of one
        ``session``. ``wait=true`` answers after the re-plan it caused is written."""
        body = await json_body(request)
        return await run_in_threadpool(ctl().report, body, wait)

    @app.get(
        "/progress",
        summary="Progress state and re-plan measurements",
        response_model=ProgressView,
        response_model_exclude_unset=True,
        responses=_err(401),
    )
    def progress_view() -> Any:
        return ctl().progress_view()

    @app.get(
        "/stats",
        summary="Per-echelon counters, unprioritized packets by reason, live queues",
        response_model=StatsView,
        response_model_exclude_unset=True,
        responses=_err(401),
    )
    def stats() -> Any:
        """Packets/bytes per registered group summed over the switches; per switch,
        each priority queue that held a packet: depth, maximum depth, last sojourn
        (``queues``). A switch that could not be read appears with its ``error``."""
        return ctl().stats()

    @app.post(
        "/stats/queues/reset",
        summary="Zero the maximum queue depths on every switch",
        response_model=QueueResetView,
        responses=_err(401),
    )
    def reset_queue_max() -> Any:
        """The maximum depths restart from the next packet out of each queue; a switch
        that could not be reset is listed in ``errors``."""
        return reset_max({name: a.switch for name, a in ctl().agents.items()})

    @app.get(
        "/status",
        summary="Switches, pipeline and entry counts",
        response_model=StatusView,
        response_model_exclude_unset=True,
        responses=_err(401),
    )
    def status() -> Any:
        return ctl().status()

    @app.get(
        "/policy",
        summary="Current policy",
        response_model=PolicyView,
        responses=_err(401),
    )
    def get_policy() -> Any:
        return {"policy": ctl().policy, "available": list(POLICIES)}

    @app.put(
        "/policy",
        summary="Switch policy at run time",
        response_model=PolicyView,
        responses=_err(400, 401, 422, 503, 507),
        openapi_extra=_body_doc(PolicyBody),
    )
    async def set_policy(request: Request) -> Any:
        body = validate(PolicyBody, await json_body(request))
        await run_in_threadpool(ctl().set_policy, body.name)
        return {"policy": ctl().policy, "available": list(POLICIES)}

    def openapi() -> dict[str, Any]:
        """FastAPI's schema plus the body models read by hand (:func:`json_body`)."""
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            bodies: list[type[BaseModel]] = [*description_models(), ReportBody, PolicyBody]
            _, defs = models_json_schema(
                [(m, "validation") for m in bodies],
                ref_template="#/components/schemas/{model}",
            )
            comps = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, sub in defs.get("$defs", {}).items():
                comps.setdefault(name, sub)
            # FastAPI declares its own 422 shape for path/query parameters; this API
            # answers every error with ErrorBody (handler above), so say that
            error_ref = {"$ref": "#/components/schemas/ErrorBody"}
            for ops in schema.get("paths", {}).values():
                for op in ops.values():
                    r422 = op.get("responses", {}).get("422")
                    if r422 is not None:
                        r422["content"] = {"application/json": {"schema": error_ref}}
                        if r422.get("description") == "Validation Error":
                            r422["description"] = "a path or query parameter is invalid"
            for name in ("HTTPValidationError", "ValidationError"):
                comps.pop(name, None)
            comps.setdefault("ErrorBody", ErrorBody.model_json_schema())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    if guarded:
        _guarded_docs(app)
    return app


def _guarded_docs(app: FastAPI) -> None:
    """``/openapi.json``, ``/docs`` and ``/redoc`` behind the bearer token (FastAPI
    serves its own without any): the schema names every endpoint of a controller
    whose operator asked for authentication."""

    @app.get("/openapi.json", include_in_schema=False)
    def openapi_json() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    def docs() -> Any:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=app.title)

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> Any:
        return get_redoc_html(openapi_url="/openapi.json", title=app.title)


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
        body = JSONResponse(plain_error("body", message), status_code=413)
        return [
            {"type": "http.response.start", "status": 413, "headers": body.raw_headers},
            {"type": "http.response.body", "body": body.body},
        ]
