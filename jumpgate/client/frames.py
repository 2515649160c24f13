"""Results as pandas DataFrames. pandas is optional: the client needs only pyarrow, and a
missing pandas is reported with the extra that installs it."""
from __future__ import annotations

import importlib
from typing import Any

import pyarrow as pa

from .errors import MissingDependency

PANDAS_EXTRA = "pip install 'jumpgate[pandas]'"


def require_pandas() -> Any:
    """The pandas module, or MissingDependency naming the extra to install."""
    try:
        return importlib.import_module("pandas")
    except ImportError as e:
        raise MissingDependency(f"to_pandas() needs pandas, which is not installed ({e}): {PANDAS_EXTRA} "
                                "(or pip install pandas)", extra="pandas") from None


def to_pandas(table: pa.Table, **options: Any) -> Any:
    """A pyarrow Table (a `collect()` result) as a pandas DataFrame; `options` go to
    `pyarrow.Table.to_pandas` (e.g. `types_mapper=pd.ArrowDtype`)."""
    if not isinstance(table, pa.Table):
        raise TypeError(f"to_pandas takes a pyarrow.Table, got {type(table).__name__}")
    require_pandas()
    return table.to_pandas(**options)
