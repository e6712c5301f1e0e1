"""Registered models leaving catdask for other platforms, as arrays plus JSON (never pickles).

- ``bundle``: a self-checking folder of ``.npy`` arrays and ``meta.json`` (what an exported
  model carries; read back with ``allow_pickle=False``).
- ``mlflow``: ``catdask export NAME[:VERSION] --mlflow URI``: an MLflow models-from-code pyfunc
  (``mlflow_pyfunc.py`` is the code MLflow loads) with a signature, the certificate as metrics
  and tags, and an alias for the newest certified version.
"""
