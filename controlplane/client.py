"""The one client of the controller's HTTP API, typed with the API's own models.

``echelonctl``, the demo (``topo/controller_process.py``) and the PTF controller test
(``ptf_tests/controller_driven.py``) all talk to the controller through
:class:`ApiClient`, so a change of the API is a change here and a type error
wherever an answer is misread. Answers are the models of
:mod:`controlplane.apimodels`; errors are :class:`ApiError` (the API answered
with its error body) and :class:`ControllerUnreachable` (it did not answer).
"""

from __future__ import annotations

import ssl
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from controlplane.apimodels import (
    JobSummary,
    JobView,
    PlanView,
    PolicyView,
    ProgressReply,
    ProgressView,
    QueueResetView,
    Removed,
    StatsView,
    StatusView,
)
from echelon.errors import EchelonError

M = TypeVar("M", bound=BaseModel)
_JOB_LIST = TypeAdapter(list[JobSummary])


class ApiError(EchelonError):
    """The controller answered with an error: ``status`` and the error body's fields."""

    def __init__(self, status: int, field: str, message: str) -> None:
        text = f"{field}: {message}" if field else message
        super().__init__(f"{text} (HTTP {status})")
        self.status = status
        self.field = field
        self.message = message


class ControllerUnreachable(EchelonError):
    """No answer from the controller (not running, wrong URL, timed out)."""


def _reason(exc: httpx.HTTPError) -> str:
    """The cause in a few words: 'connection refused', not httpx's errno text."""
    text = str(exc)
    if isinstance(exc, httpx.ConnectError):
        if "refused" in text.lower():
            return "connection refused"
        return f"cannot connect ({text})" if text else "cannot connect"
    if isinstance(exc, httpx.TimeoutException):
        return "no answer in time"
    return text or type(exc).__name__


class ApiClient:
    """Calls of the northbound API; one keep-alive connection (``with`` closes it)."""

    def __init__(
        self,
        base: str,
        token: str | None = None,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
        ca: str | Path | None = None,
    ) -> None:
        """``http``: an existing client to send through (tests pass FastAPI's
        ``TestClient``, an ``httpx.Client`` that calls the app in process); ``ca``: the
        PEM CA an ``https`` controller's certificate must chain to (default: the
        system's roots)."""
        self.base = base.rstrip("/")
        if not 0 < timeout < float("inf"):  # also NaN; httpx took -1 and nan silently
            raise EchelonError(f"--timeout: must be a positive number of seconds, got {timeout}")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        verify: ssl.SSLContext | bool = True
        if ca is not None:
            try:
                verify = ssl.create_default_context(cafile=str(ca))
            except (OSError, ssl.SSLError) as exc:
                raise EchelonError(f"--ca: cannot use {ca} as a CA: {exc}") from None
        if http is None:
            try:
                http = httpx.Client(
                    base_url=self.base, headers=headers, timeout=timeout, verify=verify
                )
            except (httpx.InvalidURL, ValueError) as exc:
                raise EchelonError(f"--api: not a URL: {base!r} ({exc})") from None
        else:
            http.headers.update(headers)
        self._http = http

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(
        self,
        _t: type[BaseException] | None,
        _e: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------ transport

    def call(
        self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None
    ) -> Any:
        """One request; the decoded JSON answer, or :class:`ApiError`/``ControllerUnreachable``."""
        try:
            resp = self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as exc:
            raise ControllerUnreachable(
                f"cannot reach the controller at {self.base}: {_reason(exc)}"
            ) from None
        try:
            data = resp.json()
        except ValueError:
            data = None
        if resp.status_code >= 400:
            if isinstance(data, dict) and "message" in data:
                raise ApiError(resp.status_code, str(data.get("field", "")), str(data["message"]))
            detail = data.get("detail") if isinstance(data, dict) else resp.text[:200]
            raise ApiError(resp.status_code, "", str(detail or resp.reason_phrase))
        return data

    def _typed(self, model: type[M], data: Any) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise ApiError(200, model.__name__, f"unexpected answer: {exc}") from None

    # ------------------------------------------------------------ endpoints

    def register(self, desc: dict[str, Any]) -> JobView:
        return self._typed(JobView, self.call("POST", "/jobs", desc))

    def plan(self, desc: dict[str, Any]) -> PlanView:
        """What registering ``desc`` would install now (``POST /plan``; nothing changes)."""
        return self._typed(PlanView, self.call("POST", "/plan", desc))

    def jobs(self) -> list[JobSummary]:
        try:
            return _JOB_LIST.validate_python(self.call("GET", "/jobs"))
        except ValidationError as exc:
            raise ApiError(200, "jobs", f"unexpected answer: {exc}") from None

    def show(self, job: str) -> JobView:
        return self._typed(JobView, self.call("GET", f"/jobs/{quote(job, safe='')}"))

    def remove(self, job: str) -> Removed:
        return self._typed(Removed, self.call("DELETE", f"/jobs/{quote(job, safe='')}"))

    def stats(self) -> StatsView:
        return self._typed(StatsView, self.call("GET", "/stats"))

    def reset_queue_max(self) -> QueueResetView:
        return self._typed(QueueResetView, self.call("POST", "/stats/queues/reset"))

    def status(self) -> StatusView:
        return self._typed(StatusView, self.call("GET", "/status"))

    def policy(self) -> PolicyView:
        return self._typed(PolicyView, self.call("GET", "/policy"))

    def set_policy(self, name: str) -> PolicyView:
        return self._typed(PolicyView, self.call("PUT", "/policy", {"name": name}))

    def report(self, body: dict[str, Any], wait: bool = False) -> ProgressReply:
        params = {"wait": "true"} if wait else None
        return self._typed(ProgressReply, self.call("POST", "/progress", body, params))

    def progress(self) -> ProgressView:
        return self._typed(ProgressView, self.call("GET", "/progress"))

    def in_sync(self, switch: str | None = None) -> bool:
        """Whether ``switch`` (default: every switch) is in sync; False if unreachable."""
        try:
            st = self.status()
        except (ControllerUnreachable, ApiError):
            return False
        if switch is not None:
            sw = st.switches.get(switch)
            return sw is not None and sw.in_sync
        return bool(st.switches) and all(s.in_sync for s in st.switches.values())


def plain(value: BaseModel | list[Any]) -> Any:
    """An answer back as the API's JSON (``echelonctl --json``): what was sent, no more."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value.model_dump(mode="json", exclude_unset=True)
