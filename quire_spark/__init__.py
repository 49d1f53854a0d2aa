"""Quire topics as a PySpark data source and sink (format "quire"); see docs/spark.md.

from quire_spark import QuireDataSource
spark.dataSource.register(QuireDataSource)
df = spark.read.format("quire").option("serviceUrl", url).option("topic", "public/default/t").load()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["QuireDataSource"]

if TYPE_CHECKING:
    from quire_spark.source import QuireDataSource


def __getattr__(name: str) -> Any:
    # PySpark is imported only when the data source is asked for: executors import the reader
    # modules without it, and so does the compactor's task code
    if name == "QuireDataSource":
        from quire_spark.source import QuireDataSource

        return QuireDataSource
    raise AttributeError(name)
