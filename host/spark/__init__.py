"""udm.host.spark — udmkit on Apache Spark: session factory, Spark SQL registration, DataFrame ↔
element conversion, CHT reconstitution, and the batch path (one engine per key bucket).

Importing this package does not import pyspark; each function does when called, and says clearly
(`SparkExtrasMissing`) when the Spark extras are not installed.
"""

from __future__ import annotations

from udm.host.spark.session import SparkExtrasMissing, get_spark, require_spark
from udm.host.spark.sql import Registered, register_sql

__all__ = ["Registered", "SparkExtrasMissing", "get_spark", "register_sql", "require_spark"]
