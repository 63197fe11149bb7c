"""Job descriptions: what a user writes about a training job, and its validation.

A description is a flat mapping (YAML or JSON)::

    job: gpipe-demo          # name, unique per deployment; no '/'
    paradigm: gpipe          # one of echelon.paradigms.PARADIGMS
    hosts: [h1, h2, h3]      # the workers it uses (meaning depends on the paradigm)
    weight: 1.0              # optional: importance in inter-group ordering
    micro_batches: 4         # ... paradigm-specific fields
    stages:
      - {fwd_s: 0.010, bwd_s: 0.020, activation_bytes: 4000000}

Everything a user knows -- compute times in seconds, tensor sizes in bytes, host
names -- and nothing derived: the arrangement comes from the paradigm's model.
Every error is a :class:`SpecError` naming the field, e.g. ``stages[2].fwd_s``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, create_model, field_validator

from echelon.errors import SpecError, UnknownHostError
from echelon.model import EchelonFlow, Flow, IterationPlan
from echelon.paradigms import PARADIGMS, get_paradigm
from echelon.paradigms.plan import PlanBuilder
from echelon.specs import (
    Name,
    Positive,
    PositiveBytes,
    Seconds,
    SpecModel,
    SpecWarning,
    Text,
    fail,
    read_file,
    unit_warnings,
    validate,
)


def _job_name(value: str) -> str:
    if "/" in value or value.strip() != value:
        raise ValueError(f"must not contain '/' or surrounding spaces, got {value!r}")
    return value


#: A job ID: a name without '/' (it is a path segment of the API) or surrounding spaces.
JobName = Annotated[Name, AfterValidator(_job_name)]


class JobCommon(SpecModel):
    """The fields every paradigm job description has."""

    job: JobName = Field(description="job ID, unique per deployment; no '/'")
    paradigm: Name
    hosts: Annotated[tuple[Name, ...], Field(min_length=1, max_length=4096)]
    weight: Positive = 1.0
    description: Text = ""

    @field_validator("hosts")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, name in enumerate(value):
            if name in value[:i]:
                raise fail(f"duplicate host {name!r}", at=i)
        return value


@cache
def job_model(paradigm: str) -> type[SpecModel]:
    """The full model of a ``paradigm`` job description: common fields + the paradigm's."""
    par = get_paradigm(paradigm)
    tag: Any = Literal.__getitem__(paradigm)  # Literal["gpipe"], built at run time
    fields: dict[str, Any] = {"paradigm": (tag, ...)}
    model: type[SpecModel] = create_model(
        f"{paradigm.title().replace('_', '')}Job",
        __base__=(JobCommon, par.model),
        __doc__=f"A {paradigm} job: {par.summary}.",
        **fields,
    )
    return model


class FlowSpec(SpecModel):
    """One flow of an explicit EchelonFlow: ``size`` bytes, arrangement ``offset`` (s)."""

    src: Name
    dst: Name
    size: PositiveBytes
    offset: Seconds = 0.0


class EchelonFlowSpec(SpecModel):
    """One group of an explicit spec: its flows in formation order."""

    group: Name
    weight: Positive = 1.0
    t_ref: Seconds = 0.0
    flows: Annotated[tuple[FlowSpec, ...], Field(min_length=1, max_length=4096)]


class ExplicitJob(SpecModel):
    """An explicit EchelonFlow spec: groups of flows with their offsets, no paradigm."""

    job: JobName
    echelonflows: Annotated[tuple[EchelonFlowSpec, ...], Field(min_length=1, max_length=1024)]


def description_models() -> list[type[SpecModel]]:
    """Every shape a registration may take: one model per paradigm, and the explicit spec
    (the API's request schema is their union)."""
    return [job_model(name) for name in sorted(PARADIGMS)] + [ExplicitJob]


@dataclass(frozen=True)
class JobSpec:
    """A validated job description. ``params`` is the paradigm's parsed fields (an
    instance of a typed model, frozen)."""

    job_id: str
    paradigm: str
    hosts: tuple[str, ...]
    params: Any
    weight: float = 1.0
    description: str = ""

    def _builder(
        self, iteration: int, t0: float, builder: type[PlanBuilder] = PlanBuilder
    ) -> PlanBuilder:
        if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
            raise SpecError("iteration", f"must be a non-negative integer, got {iteration!r}")
        b = builder(self.job_id, iteration, float(t0), self.weight)
        get_paradigm(self.paradigm).build(b, self.hosts, self.params)
        return b

    def plan(
        self, iteration: int = 0, t0: float = 0.0, builder: type[PlanBuilder] = PlanBuilder
    ) -> IterationPlan:
        """The EchelonFlows of ``iteration`` (starting at ``t0``) and its compute tasks;
        ``builder`` may refuse the expansion as it grows (the controller's flow limit)."""
        return self._builder(iteration, t0, builder).build()

    @cached_property
    def ideal_iteration_s(self) -> float:
        """Contention-free iteration time: when iteration i+1 ideally starts after i.

        Cached: the spec is immutable, and a simulator asks once per iteration."""
        b = self._builder(0, 0.0)
        b.build()
        return b.makespan

    def to_dict(self) -> dict[str, Any]:
        """The description again, in the form :func:`load_job` reads back."""
        out: dict[str, Any] = {
            "job": self.job_id,
            "paradigm": self.paradigm,
            "hosts": list(self.hosts),
        }
        if self.weight != 1.0:
            out["weight"] = self.weight
        if self.description:
            out["description"] = self.description
        fields = get_paradigm(self.paradigm).fields
        # fields at their default left out: short descriptions, and never a field the
        # paradigm does not accept
        params = self.params.model_dump(mode="json", exclude_defaults=True)
        out.update((k, v) for k, v in params.items() if k in fields)
        return out


def load_job(data: Mapping[str, Any], known_hosts: Collection[str] | None = None) -> JobSpec:
    """Validate a description; ``known_hosts`` (e.g. a topology's hosts) restricts ``hosts``."""
    spec = validate_job(data, known_hosts)
    spec.plan()  # surfaces model errors (e.g. an empty iteration) at load time
    return spec


def validate_job(data: Mapping[str, Any], known_hosts: Collection[str] | None = None) -> JobSpec:
    """:func:`load_job` without building the plan, for a caller that builds it its own
    way (:func:`load_description`: the iteration it was asked for)."""
    if not isinstance(data, Mapping):
        raise SpecError("job", f"must be a mapping, got {type(data).__name__}")
    for key in ("job", "paradigm", "hosts"):
        if key not in data:
            raise SpecError(key, "is required")
    name = data["paradigm"]
    if not isinstance(name, str) or not name:
        raise SpecError("paradigm", f"must be a non-empty string, got {name!r}")
    paradigm = get_paradigm(name)
    raw_hosts = data["hosts"]
    if known_hosts is not None and isinstance(raw_hosts, list | tuple):
        # before the fields: a wrong host is the likelier mistake to report first
        for i, h in enumerate(raw_hosts):
            if isinstance(h, str) and h not in known_hosts:
                raise UnknownHostError(
                    f"hosts[{i}]", f"unknown host {h!r} (known: {sorted(known_hosts)})"
                )
    m = validate(job_model(paradigm.name), data)
    hosts = tuple(getattr(m, "hosts"))  # noqa: B009 (a dynamic model)
    fields = paradigm.model.model_construct(**{k: getattr(m, k) for k in paradigm.fields})
    params = paradigm.parse(fields, hosts)
    return JobSpec(
        getattr(m, "job"),  # noqa: B009
        paradigm.name,
        hosts,
        params,
        float(getattr(m, "weight")),  # noqa: B009
        getattr(m, "description"),  # noqa: B009
    )


def load_job_file(file: str | Path, known_hosts: Collection[str] | None = None) -> JobSpec:
    """Read a YAML or JSON description; unreadable files are SpecErrors too."""
    return load_job(read_file(file), known_hosts)


@dataclass(frozen=True)
class Description:
    """Any registration (paradigm description or explicit spec), validated: the job
    ID, the EchelonFlows of iteration 0, the paradigm spec if any, unit warnings.
    Also what the controller keeps and plans of every registered job."""

    job_id: str
    echelons: tuple[EchelonFlow, ...]
    spec: JobSpec | None
    warnings: tuple[SpecWarning, ...]
    #: the *opening* groups, released a fixed compute time (or none) after every
    #: iteration's start: a paradigm job's groups with a flow that waits on no flow
    #: (:func:`opening_groups`); an explicit spec has no tasks, so its groups whose
    #: ``t_ref`` is the iteration's start
    opening: frozenset[str] = frozenset()

    @property
    def ideal_iteration_s(self) -> float:
        """The paradigm's ideal iteration; for an explicit spec the last ideal finish."""
        if self.spec is not None:
            return self.spec.ideal_iteration_s
        return max(ef.ideal_finish(f.index) for ef in self.echelons for f in ef.flows)

    @cached_property
    def groups(self) -> tuple[str, ...]:
        """The groups in first-appearance order (the controller gives each an echelon ID)."""
        return tuple(dict.fromkeys(ef.group for ef in self.echelons))

    def of_group(self, group: str) -> tuple[tuple[EchelonFlow, ...], tuple[str, ...]]:
        """The group's EchelonFlows and source hosts (cached: the controller re-plans
        a group on every change)."""
        cache: dict[str, tuple[tuple[EchelonFlow, ...], tuple[str, ...]]]
        cache = self.__dict__.setdefault("_by_group", {})
        if group not in cache:
            mine = tuple(ef for ef in self.echelons if ef.group == group)
            cache[group] = (mine, tuple(sorted({f.src for ef in mine for f in ef.flows})))
        return cache[group]

    def pairs(self, group: str) -> tuple[tuple[str, str], ...]:
        """The (source, destination) hosts of the group's flows, sorted: where its
        packets go, which says which switches need its entries (cached like
        :meth:`of_group`)."""
        cache: dict[str, tuple[tuple[str, str], ...]]
        cache = self.__dict__.setdefault("_pairs", {})
        if group not in cache:
            mine, _ = self.of_group(group)
            cache[group] = tuple(sorted({(f.src, f.dst) for ef in mine for f in ef.flows}))
        return cache[group]

    def shifted(self, group: str, start: float) -> tuple[EchelonFlow, ...]:
        """The group's EchelonFlows with ``t_ref`` moved by ``start`` (cached per group
        for the latest start: online re-plans repeat it until the next iteration)."""
        cache: dict[str, tuple[float, tuple[EchelonFlow, ...]]]
        cache = self.__dict__.setdefault("_shifted", {})
        hit = cache.get(group)
        if hit is None or hit[0] != start:
            mine, _ = self.of_group(group)
            hit = (start, tuple(replace(ef, t_ref=ef.t_ref + start) for ef in mine))
            cache[group] = hit
        return hit[1]


def load_description(
    data: Any,
    known_hosts: Collection[str] | None = None,
    iteration: int = 0,
    t0: float = 0.0,
    builder: type[PlanBuilder] = PlanBuilder,
) -> Description:
    """The one parser of registrations: ``echelonflows`` present -> explicit spec, else a
    paradigm description (:func:`load_job`'s checks; its plan built once, by
    ``builder``: the controller's stops a huge expansion at its flow limit). Used by
    the controller, ``echelon show`` and ``echelonctl``, so all three accept and
    refuse the same descriptions."""
    if not isinstance(data, Mapping):
        raise SpecError("job", f"must be a mapping, got {type(data).__name__}")
    if "echelonflows" in data:
        efs = _explicit(validate(ExplicitJob, data), t0)
        job_id = efs[0].job
        spec = None
        opening = frozenset(ef.group for ef in efs if ef.t_ref <= t0)
    else:
        spec = validate_job(data, known_hosts)
        plan = spec.plan(iteration, t0, builder)
        efs = list(plan.echelons)
        job_id = spec.job_id
        opening = opening_groups(plan)
        if not efs:
            raise SpecError("job", "the description produces no EchelonFlow")
    if known_hosts is not None:
        for ef in efs:
            for pos, f in enumerate(ef.flows):
                for end in ("src", "dst"):
                    host = getattr(f, end)
                    if host not in known_hosts:
                        raise UnknownHostError(
                            f"{ef.group}.flows[{pos}].{end}",
                            f"unknown host {host!r} (known: {sorted(known_hosts)})",
                        )
    return Description(job_id, tuple(efs), spec, tuple(unit_warnings(dict(data))), opening)


def opening_groups(plan: IterationPlan) -> frozenset[str]:
    """The groups an iteration opens with: those with a flow whose release waits on no
    flow of the iteration -- no compute task produces it (released at the start,
    ``IterationPlan.producer``), or its producer runs on compute alone (a pipeline's
    first stage: forward steps from the start, then its first activations).

    Why compute alone counts: such a release comes a fixed compute time after the
    iteration starts, whatever the network does, so a controller told "iteration
    ``i`` starts" can plan the group before its first byte (:mod:`controlplane.inflight`).
    Planned only on its release instead, the group's re-plan lands a reaction time
    late, and on a slow port another group's packets queued meanwhile keep the levels
    the plan without it gave them: the outcome then hinges on the controller's
    latency (docs/measurements/demo.md).

    A task runs on compute alone when it waits on no flow, every task it waits on does
    too, and so does every task before it on its host (a host runs its tasks one at a
    time, in plan order: :mod:`echelon.lanes`)."""
    free: set[str] = set()
    waiting: set[str] = set()  # hosts whose lane has met a task that waits on a flow
    for t in plan.tasks:
        if t.host in waiting or t.after_flows or not free.issuperset(t.after_tasks):
            waiting.add(t.host)
        else:
            free.add(t.id)
    producers = [[plan.producer.get((ef.name, f.index)) for f in ef.flows] for ef in plan.echelons]
    return frozenset(
        ef.group
        for ef, tasks in zip(plan.echelons, producers, strict=True)
        if any(t is None or t in free for t in tasks)
    )


def _explicit(m: ExplicitJob, t0: float = 0.0) -> list[EchelonFlow]:
    out = []
    seen: set[str] = set()
    for i, g in enumerate(m.echelonflows):
        where = f"echelonflows[{i}]"
        if g.group in seen:
            raise SpecError(f"{where}.group", f"group {g.group!r} appears twice")
        seen.add(g.group)
        flows = tuple(Flow(j, f.src, f.dst, f.size, f.offset) for j, f in enumerate(g.flows))
        try:
            ef = EchelonFlow(f"{m.job}/0/{g.group}", m.job, g.group, flows, g.t_ref + t0, g.weight)
        except SpecError as exc:  # name the field under echelonflows[i]
            raise SpecError(f"{where}.{exc.field.split('.', 1)[-1]}", exc.message) from None
        out.append(ef)
    return out
