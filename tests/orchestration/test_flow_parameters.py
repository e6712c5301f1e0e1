"""The train and retrain flows' parameters as the Prefect UI's run form shows them (the
deployment's parameter schema): a description for every parameter, the named options as choices,
the numbers' bounds, and a run refused at validation when it breaks them."""

from __future__ import annotations

import pytest

pytest.importorskip("prefect")

from prefect.exceptions import ParameterTypeError  # noqa: E402
from prefect.utilities.callables import parameter_schema  # noqa: E402

from catdask.method_names import CERTIFY_LEVELS, MAX_RESTARTS, METHOD_NAMES  # noqa: E402
from catdask.orchestration.evaluate import evaluate  # noqa: E402
from catdask.orchestration.ingest import ingest  # noqa: E402
from catdask.orchestration.parameters import documented  # noqa: E402
from catdask.orchestration.train import retrain_registered, train  # noqa: E402
from catdask.pipeline import ModelSpec  # noqa: E402


@pytest.mark.parametrize("flow", [train, retrain_registered, ingest, evaluate],
                         ids=["train", "retrain", "ingest", "evaluate"])
def test_every_parameter_has_a_description(flow):
    """Was: 19 bare names (``n_restarts``, ``max_gap``) and no description in the run form."""
    properties = parameter_schema(flow).model_dump()["properties"]
    missing = [name for name, field in properties.items() if not field.get("description")]
    assert missing == [] and len(properties) == len(flow.parameters.properties)


def test_named_options_are_choices_and_numbers_have_bounds():
    properties = parameter_schema(train).model_dump()["properties"]
    assert properties["method"]["enum"] == list(METHOD_NAMES)
    assert properties["origin"]["enum"] == ["global", "class"]
    assert properties["certify"]["enum"] == list(CERTIFY_LEVELS)
    assert (properties["n_restarts"]["minimum"], properties["n_restarts"]["maximum"]) == (
        1, MAX_RESTARTS)
    assert properties["max_iter"]["minimum"] == 1 and properties["eps"]["exclusiveMinimum"] == 0
    # The defaults the form fills in are the spec's (what `catdask train` uses).
    spec = ModelSpec()
    for name in ("method", "origin", "n_restarts", "certify", "eps", "tol", "max_iter"):
        assert properties[name]["default"] == getattr(spec, name), name
    assert properties["dataset"].get("default") is None and "dataset" in \
        parameter_schema(train).model_dump()["required"]


@pytest.mark.parametrize("parameters, message", [
    ({"n_restarts": MAX_RESTARTS + 1}, f"n_restarts: Input should be less than or equal to "
                                       f"{MAX_RESTARTS}"),
    ({"n_restarts": 0}, "n_restarts: Input should be greater than or equal to 1"),
    ({"method": "kqcs"}, "method: Input should be 'cqs', 'cas', 'kcqs' or 'kcas'"),
    ({"origin": "centroid"}, "origin: Input should be 'global' or 'class'"),
    ({"gamma": -1.0}, "gamma: Input should be greater than 0"),
])
def test_a_run_breaking_them_is_refused_before_it_starts(parameters, message):
    """What Prefect checks before the flow body runs (and its API, for a deployment whose
    schema is enforced, before the run is created): was a run that failed in the flow
    (``method``) or a fit of 100,000 restarts (``n_restarts``)."""
    with pytest.raises(ParameterTypeError, match=message):
        train.validate_parameters({"dataset": "iris", **parameters})
    ok = train.validate_parameters({"dataset": "iris", "n_restarts": MAX_RESTARTS, "gamma": None})
    assert ok["n_restarts"] == MAX_RESTARTS


@pytest.mark.parametrize("flow, parameters, message", [
    (evaluate, {"tables": ["table4"]}, "tables.0: Input should be 'table1', 'table2' or 'table3'"),
    (evaluate, {"n_splits": 1}, "n_splits: Input should be greater than or equal to 2"),
    (ingest, {"names": []}, "names: List should have at least 1 item"),
])
def test_ingest_and_evaluate_runs_breaking_their_bounds_are_refused(flow, parameters, message):
    with pytest.raises(ParameterTypeError, match=message):
        flow.validate_parameters(parameters)


def test_an_undocumented_parameter_fails_at_import():
    def flow_body(dataset, n_restarts=5):
        """Train."""

    with pytest.raises(ValueError, match=r"parameters without a description \['n_restarts'\]"):
        documented({"dataset": "a data set"})(flow_body)
    documented({"dataset": "a data set", "n_restarts": "restarts"})(flow_body)
    assert flow_body.__doc__.endswith("Args:\n    dataset: a data set\n    n_restarts: restarts")
