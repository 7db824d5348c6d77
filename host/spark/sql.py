"""Spark SQL surface: installed UDMs become SQL functions under their registered names.

- every UDF → a scalar SQL function (Arrow-backed Python UDF), arguments positional in the order of
  ``compute``'s parameters;
- every time-insensitive UDA → a SQL aggregate (pandas ``GROUPED_AGG``), so
  ``SELECT k, window.start, median(v) FROM t GROUP BY k, window(ts, '10 seconds')`` works; SQL NULLs are
  skipped like Spark's built-in aggregates do, and members reach the UDA in canonical order;
- every time-insensitive UDO → a Python UDTF taking a TABLE argument: each ``PARTITION BY`` partition
  is one window, its rows (as payload dicts) the members: ``SELECT * FROM topk(TABLE(t) PARTITION BY k,
  params => '{"k": 2, "by": "v"}')`` (parameters as JSON text, named so the parser does not read them
  as a second PARTITION BY expression). Output is one ``payload`` column of canonical JSON unless a schema is given.

Time-sensitive UDAs/UDOs need lifetimes and windows that SQL groups do not have; they run through the
batch/streaming paths (`udm.host.spark.batch`) instead and are not registered here. Neither are span UDOs
(``explode``): a query's ``flat_map`` step runs them, with a dead-letter output for the events they refuse.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from udm.host.catalog import Catalog, CatalogEntry, default_catalog
from udm.host.errors import ContractViolation, ParamError
from udm.host.spark.invoke import call_set_udm, label_of
from udm.host.spark.types import spark_type_for, to_spark_value
from udm.host.temporal.strict import canonical_json

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["Registered", "register_sql"]

# lazy imports: pyspark, pandas — importing udm.host.spark never loads Spark (its Spark-free parts run without it)


@dataclass
class Registered:
    """What `register_sql` registered, by SQL name."""

    functions: list[str] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=list)
    table_functions: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    #: UDM name → SQL name, for UDMs whose name is a Spark built-in (``sum`` → ``udm_sum``).
    renamed: dict[str, str] = field(default_factory=dict)


def _latest(cat: Catalog) -> list[CatalogEntry]:
    """The highest valid version of each registered name (what a query without a specifier gets)."""
    out = []
    for name in cat.names():
        try:
            out.append(cat.resolve(name))
        except Exception:  # ambiguous: the SQL surface cannot choose either; the caller sees it skipped
            continue
    return out


def _udf_arg_names(entry: CatalogEntry) -> list[str]:
    sig = inspect.signature(entry.cls.compute)
    return [p.name for p in sig.parameters.values()
            if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _register_udf(spark: SparkSession, sql_name: str, entry: CatalogEntry, cat: Catalog) -> None:
    from pyspark.sql.functions import udf

    names = _udf_arg_names(entry)
    udm_obj = cat.instantiate(entry, {})
    out_type = entry.manifest.output_type

    def call(*args: Any) -> Any:
        if len(args) != len(names):
            raise ContractViolation(f"SQL function {entry.name} takes {len(names)} argument(s) "
                                    f"({', '.join(names)}), got {len(args)}")
        try:
            value = udm_obj.compute(**dict(zip(names, args, strict=True)))
        except Exception as exc:
            raise ContractViolation(f"UDM {label_of(udm_obj)} failed on {args!r}: {exc}") from exc
        return to_spark_value(value, out_type)

    spark.udf.register(sql_name, udf(call, spark_type_for(out_type), useArrow=True))


def _register_uda(spark: SparkSession, sql_name: str, entry: CatalogEntry, cat: Catalog) -> None:
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    udm_obj = cat.instantiate(entry, {})
    out_type = entry.manifest.output_type

    def aggregate(values: pd.Series) -> Any:
        members = [v for v in values.tolist() if v is not None and v == v]  # SQL NULL / NaN-null skipped
        if not members:
            return None
        return to_spark_value(call_set_udm(udm_obj, members, f"a SQL group of {len(members)} rows"), out_type)

    aggregate.__annotations__ = {"values": pd.Series, "return": Any}
    spark.udf.register(sql_name, pandas_udf(aggregate, spark_type_for(out_type)))  # type: ignore[call-overload]


def _udtf_class(entry: CatalogEntry, schema: str | None) -> type:
    """A UDTF class: rows of one TABLE partition are buffered in ``eval`` and handed to the UDO in
    ``terminate`` — one UDO call per partition (= window), never per row."""
    cls, name, version = entry.cls, entry.name, entry.version
    fields: list[str] | None = None
    if schema is not None:
        from pyspark.sql.types import StructType

        parsed = StructType.fromDDL(schema)
        fields = [f.name for f in parsed.fields] if isinstance(parsed, StructType) else []

    class UdoTable:
        def __init__(self) -> None:
            self._rows: list[dict[str, Any]] = []
            self._params: str | None = None

        def eval(self, row: Any, params: str | None = None) -> Iterator[Any]:
            self._params = params
            self._rows.append(row.asDict(recursive=True))
            yield from ()

        def terminate(self) -> Iterator[Any]:
            if not self._rows:
                return
            try:
                p = cls.manifest.params.model_validate(json.loads(self._params) if self._params else {})
            except Exception as exc:
                raise ParamError(f"bad parameters for UDM {name!r} {version}: {exc}") from None
            result = call_set_udm(cls(p), self._rows, f"a TABLE partition of {len(self._rows)} rows")
            try:
                outputs = list(result)
            except TypeError:
                raise ContractViolation(f"UDM {name} {version} returned {result!r}, not an iterable") from None
            for out in outputs:
                payload = dict(out) if isinstance(out, Mapping) else {"value": out}
                if fields is None:
                    yield (canonical_json(payload),)
                else:
                    yield tuple(payload.get(f) for f in fields)

    UdoTable.__name__ = UdoTable.__qualname__ = f"Udo_{name}"
    return UdoTable


def _register_udo(spark: SparkSession, sql_name: str, entry: CatalogEntry, schema: str | None) -> None:
    from pyspark.sql.functions import udtf

    table_fn: Any = udtf(_udtf_class(entry, schema), returnType=schema or "payload string")
    spark.udtf.register(sql_name, table_fn)


def _builtin_names(spark: SparkSession) -> set[str]:
    return {r[0].lower() for r in spark.sql("SHOW SYSTEM FUNCTIONS").collect()}


def register_sql(spark: SparkSession, catalog: Catalog | None = None, *, replace_builtins: bool = False,
                 prefix: str = "", udo_schemas: Mapping[str, str] | None = None) -> Registered:
    """Register every installed UDF, time-insensitive UDA and time-insensitive UDO with ``spark`` under
    ``prefix`` + its registered name (highest valid version, default parameters).

    A name that is already a Spark built-in (``sum``, ``count``, ``median``...) would replace the
    built-in for the whole session, so by default it is registered as ``udm_<name>`` instead (see
    `Registered.renamed`); ``replace_builtins=True`` takes the plain name anyway. ``udo_schemas`` maps
    a UDO name to a DDL schema (``"sym string, v double, rank int"``) for typed UDTF output instead of
    one JSON ``payload`` column.
    """
    cat = catalog if catalog is not None else default_catalog()
    schemas = dict(udo_schemas or {})
    builtins = set() if replace_builtins else _builtin_names(spark)
    done = Registered()
    for entry in _latest(cat):
        man = entry.manifest
        if man.properties.time_sensitive:
            done.skipped[entry.name] = "time-sensitive: needs lifetimes; use the batch/streaming paths"
            continue
        if man.span:  # a TABLE partition is a window here; a span UDO reads one event (with a dead letter)
            done.skipped[entry.name] = "span UDO: run it in a flat_map step (udm run, run_batch, run_stream)"
            continue
        sql_name = prefix + entry.name
        if sql_name.lower() in builtins:
            sql_name = f"udm_{entry.name}"
            done.renamed[entry.name] = sql_name
        if man.kind == "udf":
            _register_udf(spark, sql_name, entry, cat)
            done.functions.append(sql_name)
        elif man.kind == "uda":
            _register_uda(spark, sql_name, entry, cat)
            done.aggregates.append(sql_name)
        else:
            _register_udo(spark, sql_name, entry, schemas.get(entry.name))
            done.table_functions.append(sql_name)
    return done
