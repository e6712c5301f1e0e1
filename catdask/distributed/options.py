"""Settings of a Dask fit: how the Gram operator caches its blocks, read from Dask's configuration
(so also from ``DASK_CATDASK__GRAM__CACHE`` and friends): :func:`gram_options` sets them for a
block of code, :func:`gram_cache_settings` reads them as ``DaskGramOperator`` arguments.
"""

from __future__ import annotations


def gram_options(cache=None, store=None, dtype=None, block_rows=None):
    """Context manager setting the kernel backend's Gram cache (see ``DaskGramOperator``).

    Parameters
    ----------
    cache : {"auto", "recompute", "memory", "zarr"}, optional
    store : str, optional
        zarr path of the Gram cache (implies ``cache="zarr"`` under ``"auto"``).
    dtype : {"float64", "float32"}, optional
    block_rows : int, optional

    Examples
    --------
    >>> from catdask.distributed import gram_options
    >>> with gram_options(cache="zarr", store="/scratch/gram.zarr", dtype="float32"):  # doctest: +SKIP
    ...     KernelCategorySpace().fit(X_dask, y)
    """
    import dask

    values = {"cache": cache, "store": store, "dtype": dtype, "block-rows": block_rows}
    return dask.config.set({f"catdask.gram.{k}": v for k, v in values.items() if v is not None})


def gram_cache_settings():
    """The current Gram-cache settings as ``DaskGramOperator`` keyword arguments."""
    import dask

    get = dask.config.get
    return {
        "cache": get("catdask.gram.cache", "auto"),
        "store": get("catdask.gram.store", None),
        "cache_dtype": get("catdask.gram.dtype", "float64"),
        "block_rows": get("catdask.gram.block-rows", None),
    }

