"""The query spec (INTERFACES §2): one pydantic model behind the JSON/YAML file and the fluent API.

No ``from __future__ import annotations`` here: every model's field types are then objects already, and
pydantic need not compile and evaluate each annotation string (a ``typing.ForwardRef`` apiece) when the
models are built at import — ~10 % of this module's import, which every ``udm run`` pays (issue #26).
"""

import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PositiveInt,
    StrictInt,
    ValidationError,
    model_validator,
)

from udm.host.errors import QuerySpecError
from udm.sdk import INF, ClipPolicy, OutputPolicy

__all__ = [
    "AggregateSpec",
    "AlignStep",
    "AlterLifetimeStep",
    "CountByEnd",
    "CountByStart",
    "Cumulate",
    "FilterStep",
    "FinalizeStep",
    "FlatMapStep",
    "Hopping",
    "InputSpec",
    "JoinStep",
    "LmergeStep",
    "MapStep",
    "OnViolation",
    "ProjectStep",
    "QuerySpec",
    "RepairSpec",
    "Rows",
    "Session",
    "Snapshot",
    "Step",
    "StreamProperties",
    "Time",
    "Tumbling",
    "UdfCall",
    "UnionStep",
    "WindowSpec",
    "WindowStep",
    "duration_ticks",
    "format_validation_error",
    "load_query",
    "parse_query",
]


def _time(v: Any) -> Any:
    if isinstance(v, str) and v.lower() == "inf":
        return INF
    return v


#: A tick in a query spec: an integer or the string "inf".
Time = Annotated[int, BeforeValidator(_time), Field(ge=0)]

OnViolation = Literal["dead_letter", "adjust", "error"]


# The empty defaults below come from Python functions, not from the builtins ``dict`` and ``list``: pydantic
# reads a default factory's signature, and a builtin's is parsed from its text with `tokenize`, whose first
# use compiles its regular expressions — ~30 % of building `QuerySpec`, ~4 ms of every run's start-up.
def _no_fields() -> dict[str, Any]:
    return {}


def _no_names() -> list[Any]:
    return []


class _Strict(BaseModel):
    #: defer_build: a part's own validator and serializer are compiled on its first own use; `QuerySpec`'s
    #: (built at import, below) holds every part's schema, so a run compiles no other (issue #26)
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)


class Tumbling(_Strict):
    type: Literal["tumbling"] = "tumbling"
    size: PositiveInt
    offset: int = 0


class Hopping(_Strict):
    type: Literal["hopping"] = "hopping"
    size: PositiveInt
    hop: PositiveInt
    offset: int = 0


class Cumulate(_Strict):
    """Each period's running windows, one per step (SEMANTICS §3): ``[offset + k*size, offset + k*size +
    i*step)`` for ``i = 1 .. size/step`` ("so far today, every minute")."""

    type: Literal["cumulate"] = "cumulate"
    #: ticks, within int64 (the engine's times)
    size: int = Field(gt=0, lt=INF)
    step: int = Field(gt=0, lt=INF)
    offset: int = Field(default=0, gt=-INF, lt=INF)

    @model_validator(mode="after")
    def _step_divides_size(self) -> Self:
        if self.size % self.step:
            raise ValueError(f"cumulate: step {self.step} must divide size {self.size} "
                             f"(size/step running windows per period)")
        return self


class Snapshot(_Strict):
    type: Literal["snapshot"] = "snapshot"


class CountByStart(_Strict):
    type: Literal["count_by_start"] = "count_by_start"
    n: PositiveInt
    hop: PositiveInt = 1


class CountByEnd(_Strict):
    type: Literal["count_by_end"] = "count_by_end"
    n: PositiveInt
    hop: PositiveInt = 1


class Rows(_Strict):
    """True row windows (SEMANTICS §9): SQL/ESL ``ROWS n-1 PRECEDING SLIDE slide`` over the group's CHT rows."""

    type: Literal["rows"] = "rows"
    n: PositiveInt
    slide: PositiveInt = 1
    partial: bool = False


class Session(_Strict):
    """Session windows (SEMANTICS §9): maximal runs of events whose starts come within ``gap`` of the
    run's largest end so far."""

    type: Literal["session"] = "session"
    gap: int = Field(ge=0)


WindowSpec = Annotated[Tumbling | Hopping | Cumulate | Snapshot | CountByStart | CountByEnd | Rows | Session,
                       Field(discriminator="type")]


class _StepBase(_Strict):
    """What every step has in a query graph (SEMANTICS §10): a name and the streams it reads."""

    #: the step's name; default ``s<index>``
    id: str | None = Field(default=None, min_length=1)
    #: the input or step (or, for multi-input ops, the list of them) this step reads; default: the step before
    from_: str | list[str] | None = Field(default=None, alias="from")

    @property
    def sources(self) -> list[str] | None:
        """``from`` as a list (None when omitted)."""
        if self.from_ is None:
            return None
        return [self.from_] if isinstance(self.from_, str) else list(self.from_)


class FilterStep(_StepBase):
    """Keep the events for which a UDF returns true (span-based; lifetimes unchanged)."""

    op: Literal["filter"] = "filter"
    udf: str
    version: str | None = None
    args: dict[str, str] = Field(default_factory=_no_fields)
    params: dict[str, Any] = Field(default_factory=_no_fields)


class MapStep(_StepBase):
    """Add (or overwrite) payload field ``as`` with a UDF's result (span-based; lifetimes unchanged)."""

    op: Literal["map"] = "map"
    udf: str
    version: str | None = None
    args: dict[str, str] = Field(default_factory=_no_fields)
    params: dict[str, Any] = Field(default_factory=_no_fields)
    as_: str = Field(alias="as")


class FlatMapStep(_StepBase):
    """Run a span UDO once per event: zero or more output events each (SEMANTICS §10 ``flat_map``)."""

    op: Literal["flat_map"] = "flat_map"
    udm: str
    version: str | None = None
    params: dict[str, Any] = Field(default_factory=_no_fields)


class AggregateSpec(_Strict):
    """One UDA of a window step's ``aggregates`` (SEMANTICS §9): its own UDM, input mapping, parameters
    and output field, over the step's shared membership."""

    udm: str
    version: str | None = None
    input: str | dict[str, str] | None = None
    params: dict[str, Any] = Field(default_factory=_no_fields)
    as_: str = Field(alias="as", min_length=1)


class WindowStep(_StepBase):
    """Group & apply a UDA or UDO over windows (SEMANTICS §3–7); or, with ``aggregates``, several UDAs
    over one membership with one output per window (SEMANTICS §9)."""

    op: Literal["window"] = "window"
    window: WindowSpec
    group_by: list[str] = Field(default_factory=_no_names)
    #: the UDM; None exactly when ``aggregates`` is given
    udm: str | None = None
    aggregates: list[AggregateSpec] | None = Field(default=None, min_length=1)
    version: str | None = None
    input: str | dict[str, str] | None = None
    params: dict[str, Any] = Field(default_factory=_no_fields)
    as_: str | None = Field(default=None, alias="as")
    clip: ClipPolicy = "none"
    output: OutputPolicy = "window"
    max_delay: Time = 0
    max_memory_time: Time = INF
    #: progressive (early) output: also emit windows still open that hold the watermark (``W.LE <= m``) and
    #: revise them as they change; ``0`` at every change, ``d > 0`` at most once per ``d`` ticks of ``m``
    #: (None: off). Never changes the CHT or the output CTIs.
    early: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_udm_or_aggregates(self) -> Self:
        if self.aggregates is None:
            if self.udm is None:
                raise ValueError("a window step needs 'udm' (or 'aggregates')")
            return self
        if self.udm is not None:
            raise ValueError("give either 'udm' or 'aggregates', not both")
        stray = [k for k, v in (("version", self.version), ("input", self.input), ("params", self.params),
                                ("as", self.as_)) if v]
        if stray:
            raise ValueError(f"with 'aggregates', {', '.join(stray)} belong(s) inside each aggregate")
        names = [a.as_ for a in self.aggregates]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"aggregates: output field(s) {', '.join(map(repr, dup))} given twice")
        clash = sorted(set(names) & set(self.group_by))
        if clash:
            raise ValueError(f"aggregates: output field(s) {', '.join(map(repr, clash))} are group_by keys "
                             f"(each output carries the keys once)")
        return self

    @property
    def alias(self) -> str:
        """Output field of a UDA result (default: the UDM name); with ``aggregates``, the first one's."""
        if self.aggregates is not None:
            return self.aggregates[0].as_
        return self.as_ or self.udm or ""

    @property
    def aliases(self) -> list[str]:
        """Every output field a UDA result of this step writes."""
        if self.aggregates is not None:
            return [a.as_ for a in self.aggregates]
        return [self.alias]

    def part(self, agg: AggregateSpec) -> Self:
        """The single-UDA step one aggregate stands for (same window, groups, policies)."""
        return self.model_copy(update={"udm": agg.udm, "version": agg.version, "input": agg.input,
                                       "params": dict(agg.params), "as_": agg.as_, "aggregates": None})


class ProjectStep(_StepBase):
    """Rewrite the payload (SEMANTICS §10): ``keep`` (else all fields), then ``drop``, ``rename``, ``set``."""

    op: Literal["project"] = "project"
    keep: list[str] | None = None
    drop: list[str] = Field(default_factory=_no_names)
    rename: dict[str, str] = Field(default_factory=_no_fields)
    set: dict[str, Any] = Field(default_factory=_no_fields)

    @model_validator(mode="after")
    def _one_meaning(self) -> Self:
        if self.keep is None and not (self.drop or self.rename or self.set):
            raise ValueError("project needs at least one of keep, drop, rename, set")
        targets = list(self.rename.values())
        if len(set(targets)) != len(targets):
            raise ValueError("rename maps two fields to one name")
        return self


class Shift(_Strict):
    shift: int


class SnapGrid(_Strict):
    size: PositiveInt
    offset: int = 0


class Snap(_Strict):
    snap: SnapGrid


class Const(_Strict):
    const: PositiveInt


class AlterLifetimeStep(_StepBase):
    """New lifetime ``[f(LE), f(LE) + duration)`` (SEMANTICS §10, CEDR's AlterLifetime)."""

    op: Literal["alter_lifetime"] = "alter_lifetime"
    le: Literal["keep"] | Shift | Snap = "keep"
    duration: Literal["keep", "inf"] | Const = "keep"

    @model_validator(mode="after")
    def _snap_needs_fixed_duration(self) -> Self:
        if isinstance(self.le, Snap) and self.duration == "keep":
            raise ValueError("le 'snap' needs a 'const' or 'inf' duration (a kept duration could end before "
                             "the snapped start)")
        return self


class UnionStep(_StepBase):
    """Multiset sum of the inputs' CHTs; ``distinct``: one row per distinct ``(LE, RE, payload)``."""

    op: Literal["union"] = "union"
    distinct: bool = False


class UdfCall(_Strict):
    """A UDF called by an operator (``join.where``): name, version, argument mapping, parameters."""

    udf: str
    version: str | None = None
    args: dict[str, str] = Field(default_factory=_no_fields)
    params: dict[str, Any] = Field(default_factory=_no_fields)


def _on_pairs(v: Any) -> Any:
    """``on: "k"`` and ``on: ["k", ...]`` are shorthands for equal field names on both sides."""
    if isinstance(v, str):
        return [[v, v]]
    if isinstance(v, list):
        return [[x, x] if isinstance(x, str) else x for x in v]
    return v


class JoinStep(_StepBase):
    """Temporal equijoin of two inputs (SEMANTICS §10): ``inner`` or ``left_anti``."""

    op: Literal["join"] = "join"
    on: Annotated[list[tuple[str, str]], BeforeValidator(_on_pairs), Field(min_length=1)]
    type: Literal["inner", "left_anti"] = "inner"
    where: UdfCall | None = None
    left_prefix: str = ""
    right_prefix: str = ""


class LmergeStep(_StepBase):
    """Logical merge of logically equivalent inputs (SEMANTICS §8, seeds/001).

    ``join_at``: sources (names in ``from``) that join at a time ``t`` (seeds/001 §V.B): each is only
    guaranteed to carry the events with ``RE >= t``, and counts once the output CTI reaches ``t``.
    ``feedback``: tell the step feeding a lagging input that times before the output CTI are no longer
    needed, so it skips their work (seeds/001 §V.D, semantics-notes 25)."""

    op: Literal["lmerge"] = "lmerge"
    algorithm: Literal["auto", "R0", "R1", "R2", "R3", "R4"] = "auto"
    join_at: dict[str, Time] = Field(default_factory=_no_fields)
    feedback: bool = False


_DURATION = r"\s*(\d+(?:\.\d+)?)\s*(us|ms|s|m|h|d)?\s*"
_MICROS = {None: 1, "us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}


def duration_ticks(text: str) -> int:
    """``"500"`` → 500 ticks; ``"10s"``, ``"5m"``, ``"1h"``, ``"250ms"``, ``"1.5s"`` → microsecond ticks (the
    time of timestamp inputs, and of the wall clock); ValueError otherwise."""
    m = re.fullmatch(_DURATION, text)
    if m is None or (m.group(2) is None and "." in m.group(1)):
        raise ValueError(f"{text!r}: expected a number of ticks or a duration like 10s, 5m, 1h, 250ms")
    return round(float(m.group(1)) * _MICROS[m.group(2)])


def _wall_duration(v: Any) -> Any:
    """``max_wait``: a duration ``"2s"``, ``"250ms"``, ``"1m"``, or an integer number of microseconds (what it
    is held as)."""
    return duration_ticks(v) if isinstance(v, str) else v


class AlignStep(_StepBase):
    """Align (seeds/003 §4.5, SEMANTICS §7, §10): hold output until the CTI makes it final, or until it
    is ``max_delay`` ticks behind the watermark; ``max_wait`` (wall clock, microseconds) bounds the hold.
    CHT-transparent."""

    op: Literal["align"] = "align"
    max_delay: Time = 0
    max_wait: Annotated[StrictInt, BeforeValidator(_wall_duration), Field(ge=0)] | None = None


class FinalizeStep(_StepBase):
    """Finalize (seeds/003 §4.6, SEMANTICS §7, §10): ``m - max_memory_time`` is a CTI for what follows;
    corrections older than that are dead-lettered."""

    op: Literal["finalize"] = "finalize"
    max_memory_time: Time = INF


Step = Annotated[
    FilterStep | MapStep | WindowStep | ProjectStep | AlterLifetimeStep | UnionStep | JoinStep | LmergeStep
    | FlatMapStep | AlignStep | FinalizeStep,
    Field(discriminator="op"),
]

#: ops that read exactly one stream
SINGLE_INPUT_OPS = frozenset({"filter", "map", "window", "project", "alter_lifetime", "flat_map", "align",
                              "finalize"})


class RepairSpec(_Strict):
    """Retraction-chain repair of an input (seeds/003 Finalize, semantics-notes 20): a retraction arriving
    before its insert or its previous chain link waits up to ``horizon`` ticks of the input's watermark."""

    horizon: Time


class StreamProperties(_Strict):
    """What an input promises about its physical stream (seeds/001 §III.C); ``lmerge`` with
    ``algorithm: auto`` picks the cheapest algorithm these allow. Nothing is promised by default.

    ``ordered``: LEs never decrease in arrival order (``"strict"``: they always increase);
    ``insert_only``: no retractions; ``duplicates``: false when ``(LE, payload)`` is a key of the CHT at
    every prefix; ``deterministic_ties``: rows with equal LE arrive in the same order on every replica."""

    ordered: bool | Literal["strict"] = False
    insert_only: bool = False
    duplicates: bool = True
    deterministic_ties: bool = False


class InputSpec(_Strict):
    """A named input of a query graph: its own violation policy and repair (default: the query's), and the
    properties its stream promises (used by ``lmerge``'s ``algorithm: auto``)."""

    on_violation: OnViolation | None = None
    repair: RepairSpec | None = None
    properties: StreamProperties = Field(default_factory=StreamProperties)


class QuerySpec(_Strict):
    model_config = ConfigDict(defer_build=False)  # (the one model every run validates: built at import)

    inputs: dict[str, InputSpec] | None = None
    steps: list[Step] = Field(min_length=1)
    output: str | None = None
    on_violation: OnViolation = "dead_letter"
    #: retraction-chain repair of every input (an input's own ``repair`` wins); None: off
    repair: RepairSpec | None = None

    @property
    def input_names(self) -> list[str]:
        """The declared inputs, in declaration order (``["main"]`` for a spec without ``inputs``)."""
        return list(self.inputs) if self.inputs else ["main"]

    def input_policy(self, name: str) -> str:
        """The violation policy of input ``name``."""
        spec = self.inputs.get(name) if self.inputs else None
        return spec.on_violation if spec is not None and spec.on_violation else self.on_violation

    @property
    def uses_repair(self) -> bool:
        """Some input has retraction-chain repair (its waiting and expiry follow the whole input's time)."""
        return self.repair is not None or any(i.repair is not None for i in (self.inputs or {}).values())

    def input_repair(self, name: str) -> RepairSpec | None:
        """The retraction-chain repair of input ``name`` (None: off)."""
        spec = self.inputs.get(name) if self.inputs else None
        return spec.repair if spec is not None and spec.repair is not None else self.repair

    def to_json_dict(self) -> dict[str, Any]:
        data = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        for holder in [data, *(data.get("inputs") or {}).values()]:
            rep = holder.get("repair")
            if rep is not None and rep["horizon"] >= INF:
                rep["horizon"] = "inf"
        default = StreamProperties().model_dump(mode="json")
        for spec in (data.get("inputs") or {}).values():
            if spec.get("properties") == default:
                del spec["properties"]  # nothing promised: the spec as written before properties existed
        for step in data["steps"]:
            for key in ("max_delay", "max_memory_time"):
                if step.get(key) is not None and step[key] >= INF:
                    step[key] = "inf"

        return data


_TAG_FIELDS = ("op", "type")


def _where(loc: tuple[Any, ...], data: Any) -> str:
    """Render a pydantic error location as the user wrote it, dropping the union tags pydantic inserts.

    Pydantic puts a discriminated union's tag right after the location of the object it picked a variant
    for (``steps.0.window.window.tumbling.size``); walking the input alongside the location, the first item
    on entering an object that equals its ``op``/``type`` value is that tag (→ ``steps[0].window.size``).
    """
    out = ""
    entered = True
    for item in loc:
        if entered and isinstance(data, dict) and any(data.get(t) == item for t in _TAG_FIELDS):
            entered = False
            continue
        if isinstance(item, int):
            out += f"[{item}]"
            data = data[item] if isinstance(data, list) and item < len(data) else None
        else:
            out += f".{item}" if out else str(item)
            data = data.get(item) if isinstance(data, dict) else None
        entered = True
    return out


def format_validation_error(exc: ValidationError, what: str, data: Any = None) -> str:
    """One line per problem, each naming where it is (``steps[0].window.size``)."""
    parts = []
    for err in exc.errors():
        loc = _where(tuple(err["loc"]), data)
        msg = err["msg"]
        if err["type"] == "union_tag_invalid":
            ctx = err.get("ctx", {})
            disc = str(ctx.get("discriminator", "tag")).strip("'")
            msg = f"unknown {disc} {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"{loc or '<root>'}: {msg}")
    return f"{what}: " + "; ".join(parts)


def parse_query(data: Any, *, source: str = "query") -> QuerySpec:
    try:
        return QuerySpec.model_validate(data)
    except ValidationError as exc:
        raise QuerySpecError(format_validation_error(exc, f"invalid {source}", data)) from None


def _yaml_on_keys(data: Any) -> Any:
    """YAML 1.1 reads the key ``on`` (a join's fields) as ``true``; no key of a query spec is a boolean."""
    if isinstance(data, dict):
        return {("on" if k is True else k): _yaml_on_keys(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_yaml_on_keys(v) for v in data]
    return data


def load_query(path: str | Path) -> QuerySpec:
    """Read a JSON or YAML query spec file (by suffix; ``.json`` else YAML, which also reads JSON)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise QuerySpecError(f"cannot read query spec {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise QuerySpecError(f"query spec {p} is not UTF-8 text (byte {exc.start})") from None
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml  # lazy: only a YAML spec needs it

            data = _yaml_on_keys(yaml.safe_load(text))
    except Exception as exc:  # json.JSONDecodeError / yaml.YAMLError: both say where
        raise QuerySpecError(f"query spec {p} is not valid JSON/YAML: {exc}") from None
    return parse_query(data, source=f"query spec {p}")
