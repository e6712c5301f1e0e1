"""The code MLflow loads for an exported catdask model (MLflow's "models from code").

It reads the model from the ``catdask_model`` artifact (a :mod:`catdask.export.bundle` folder),
so nothing is unpickled on load; predictions are the table of ``catdask predict``. Serving needs
catdask installed (``mlflow models serve -m models:/NAME@certified --env-manager local``).
"""

from __future__ import annotations

import mlflow
import numpy as np
import pandas as pd
from mlflow.pyfunc import PythonModel

from catdask.export.bundle import ARTIFACT_KEY


class CatdaskModel(PythonModel):
    """An MLflow pyfunc around a catdask model bundle."""

    def load_context(self, context):
        from catdask.export.bundle import read_bundle

        self._bundle = read_bundle(context.artifacts[ARTIFACT_KEY])

    # pd.DataFrame: the type MLflow passes (the signature has columns). A hint MLflow takes as
    # "no schema to infer" (the explicit signature is the schema), which stops the UserWarning
    # "Add type hints to the `predict` method" on every load_model; a numpy array still works.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        from catdask.pipeline.scoring import predict_table

        bundle = self._bundle
        if isinstance(model_input, pd.DataFrame):
            missing = [c for c in bundle.feature_names if c not in model_input.columns]
            if bundle.feature_names and not missing:
                model_input = model_input[bundle.feature_names]
            X = model_input.to_numpy(dtype=float)
        else:
            X = np.asarray(model_input, dtype=float)
        table = predict_table(bundle.model, X, class_names=bundle.class_names)
        return pd.DataFrame(dict(zip(table.header, table.columns)))


mlflow.models.set_model(CatdaskModel())
