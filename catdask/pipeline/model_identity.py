"""A model's identity: which spec fields make a different model, and the name that says so."""

from __future__ import annotations

#: Spec fields that do not change the fitted model (registration policy, device placement).
NOT_IDENTITY_FIELDS = ("allow_uncertified", "max_gap", "device")
#: Identity fields that change how the model is searched for and tested, not which model it
#: is (its objective): a new version under the same name may differ in them.
SEARCH_FIELDS = ("n_restarts", "random_state", "tol", "max_iter", "certify")
DEFAULT_ORIGIN = "global"


def identity(spec: dict) -> dict:
    """The spec's fields that make the model (``spec`` as ``ModelSpec.to_dict()`` or a
    recorded one; fields a record predates take their defaults)."""
    from .spec import ModelSpec

    full = ModelSpec.recorded({"spec": spec}).to_dict()
    return {k: v for k, v in full.items() if k not in NOT_IDENTITY_FIELDS}


def default_model_name(dataset: str, method: str, origin: str | None = None) -> str:
    """``iris-cqs``; ``iris-cqs-class`` for a non-default origin."""
    origin = origin or DEFAULT_ORIGIN
    return f"{dataset}-{method}" + ("" if origin == DEFAULT_ORIGIN else f"-{origin}")


def _shown(value) -> str:
    return "default" if value is None else repr(value)


def spec_conflict(store, model_name: str, dataset: str, spec: dict) -> str | None:
    """One line naming both specs when ``model_name``'s latest version was trained on another
    data set or with another identity than ``spec``; None when they agree or the model has no
    readable version yet."""
    from ..store import list_models

    versions = [v for v in list_models(store, model_name)
                if v.problem is None and "spec" in v.meta]
    if not versions:
        return None
    latest = versions[-1]
    if latest.meta.get("dataset") not in (None, dataset):
        return (f"model {model_name} is fitted on data set {latest.meta['dataset']!r}, not "
                f"{dataset!r}: train it under another name (--name), or pass --replace-spec "
                "to make it this model's next version")
    have, want = identity(latest.meta["spec"]), identity(spec)
    differ = [k for k in want if k not in SEARCH_FIELDS and have.get(k) != want[k]]
    if not differ:
        return None
    theirs = ", ".join(f"{k}={_shown(have.get(k))}" for k in differ)
    ours = ", ".join(f"{k}={_shown(want[k])}" for k in differ)
    suggested = default_model_name(dataset, want["method"], want["origin"])
    other = suggested if suggested != model_name else f"{model_name}-2"
    return (f"model {model_name} ({latest}) was trained with {theirs}; this train asks "
            f"{ours}: train it under its own name (--name {other}), or pass --replace-spec to "
            f"make it {model_name}'s next version (predict {model_name} then uses it)")
