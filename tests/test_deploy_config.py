"""The deployment files say what the code does: ``deploy/prefect.yaml`` against the flows, the
Dask recipes in ``deploy/dask/`` against Dask's configuration and catdask's address checks, and
the paths the deploy docs name. Fast: nothing is started (the Slurm and Kubernetes recipes can
only be parsed here).
"""

from __future__ import annotations

import importlib
import inspect
import re
import shlex
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
PREFECT_YAML = DEPLOY / "prefect.yaml"
DOCS = [REPO / "README.md", REPO / "docs" / "user-guide.md", REPO / "docs" / "operations.md",
        DEPLOY / "README.md",
        DEPLOY / "dask" / "README.md"]


def _deployments():
    return yaml.safe_load(PREFECT_YAML.read_text())["deployments"]


def _load_entrypoint(entrypoint: str):
    """The flow at a module-path entry point (``catdask.orchestration.train.train``), imported
    as a worker does (no file of the checkout: a worker may have only the installed package)."""
    module_name, _, name = entrypoint.rpartition(".")
    assert ":" not in entrypoint and module_name.startswith("catdask."), (
        f"entrypoint {entrypoint!r} is not a module path of the installed package")
    module = importlib.import_module(module_name)
    assert hasattr(module, name), f"{module_name} has no {name!r}"
    return getattr(module, name)


@pytest.mark.parametrize("deployment", _deployments(), ids=lambda d: d["name"])
def test_prefect_yaml_entrypoints_and_parameters_match_the_flows(deployment):
    pytest.importorskip("prefect")
    from prefect import Flow

    flow = _load_entrypoint(deployment["entrypoint"])
    assert isinstance(flow, Flow), f"{deployment['entrypoint']} is not a Prefect flow"
    signature = inspect.signature(flow.fn)
    given = deployment.get("parameters") or {}
    unknown = set(given) - set(signature.parameters)
    assert not unknown, f"{deployment['name']}: the flow takes no parameter(s) {sorted(unknown)}"
    required = {n for n, p in signature.parameters.items() if p.default is inspect.Parameter.empty}
    missing = required - set(given)
    assert not missing, f"{deployment['name']}: scheduled runs would lack {sorted(missing)}"
    # The values validate against the flow's own parameter schema (what Prefect enforces).
    flow.validate_parameters(given)
    for schedule in deployment.get("schedules") or []:
        from prefect.client.schemas.schedules import CronSchedule

        CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])
        assert schedule["timezone"] == "UTC"


def test_prefect_yaml_pool_and_variables_are_in_the_documented_commands():
    """The work pool the deployments use is the one the docs create, and the file needs no
    checkout: no pull step and no ``{{ $VAR }}`` (it once had a set_working_directory step on
    ``{{ $CATDASK_REPO }}``, so every worker needed the checkout at the same path)."""
    text = PREFECT_YAML.read_text()
    readme = (DEPLOY / "README.md").read_text()
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    pools = {d["work_pool"]["name"] for d in _deployments()}
    for pool in pools:
        for where, doc in (("deploy/README.md", readme), ("prefect.yaml's header", header)):
            assert f"work-pool create {pool} --type process" in doc, where
            assert f"worker start --pool {pool}" in doc, where
    # An empty list, not an omitted key: without one `prefect deploy` adds a pull step that
    # points at the folder it was run from.
    assert yaml.safe_load(text)["pull"] == []
    assert not re.findall(r"\{\{\s*\$(\w+)\s*\}\}", text)
    assert "--prefect-file deploy/prefect.yaml" in readme


def test_documented_deployment_names_exist():
    """``prefect deployment run 'FLOW/DEPLOYMENT'`` in the docs names a deployment of
    prefect.yaml or one that ``catdask serve`` serves."""
    pytest.importorskip("prefect")
    declared = set()
    for d in _deployments():
        declared.add(f"{_load_entrypoint(d['entrypoint']).name}/{d['name']}")
    served = {"catdask-retrain/nightly-retrain", "catdask-evaluate/weekly-evaluation",
              "catdask-train/train", "catdask-ingest/ingest"}
    named = set()
    for doc in [*DOCS, PREFECT_YAML]:
        named |= set(re.findall(r"deployment run '([\w-]+/[\w-]+)'", doc.read_text()))
    assert named and named <= declared | served, sorted(named - declared - served)


def test_files_named_in_the_deploy_docs_exist():
    pattern = re.compile(r"`((?:catdask|flows|deploy|benchmarks|tests|docs|data)/[\w./-]+?)"
                         r"(?::\w+)?`")
    missing = []
    for doc in DOCS:
        for path in pattern.findall(doc.read_text()):
            if "*" in path or "<" in path:
                continue
            if not (REPO / path).exists():
                missing.append(f"{doc.relative_to(REPO)}: {path}")
    assert not missing, missing


@pytest.mark.parametrize("name", ["dask-tls.yaml", "jobqueue-slurm.yaml",
                                  "kubernetes-daskcluster.yaml"])
def test_dask_recipes_parse(name):
    assert isinstance(yaml.safe_load((DEPLOY / "dask" / name).read_text()), dict)


def test_kubernetes_recipe_keeps_the_store_on_s3_with_credentials_from_a_secret():
    """No shared volume (issue 40): the workers read the store on S3 with the AWS variables of
    their own environment, each taken from one Secret (no value written in the file); the
    scheduler, which never reads the store, gets none."""
    spec = yaml.safe_load((DEPLOY / "dask" / "kubernetes-daskcluster.yaml").read_text())["spec"]
    text = (DEPLOY / "dask" / "kubernetes-daskcluster.yaml").read_text()
    pods = {role: spec[role]["spec"] for role in ("worker", "scheduler")}
    assert not [role for role, pod in pods.items() if "volumes" in pod
                or any("volumeMounts" in c for c in pod["containers"])]
    worker_env = {e["name"]: e for e in pods["worker"]["containers"][0]["env"]}
    secrets = set()
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        assert "value" not in worker_env[name], name
        ref = worker_env[name]["valueFrom"]["secretKeyRef"]
        assert ref["key"] == name
        secrets.add(ref["name"])
    assert len(secrets) == 1 and f"kubectl create secret generic {secrets.pop()}" in text
    scheduler_env = pods["scheduler"]["containers"][0].get("env") or []
    assert not [e for e in scheduler_env if e["name"].startswith("AWS_")]


def _unknown_keys(given: dict, reference: dict, prefix=""):
    for key, value in given.items():
        if key not in reference:
            yield prefix + key
        elif isinstance(value, dict):
            yield from _unknown_keys(value, reference[key], f"{prefix}{key}.")


def test_dask_tls_yaml_is_dask_configuration_security_reads(tmp_path):
    pytest.importorskip("distributed")
    import dask.config
    from distributed.security import Security

    settings = yaml.safe_load((DEPLOY / "dask" / "dask-tls.yaml").read_text())
    assert not list(_unknown_keys(settings, {"distributed": dask.config.get("distributed")}))
    folder = tmp_path / "dask"
    folder.mkdir()
    (folder / "dask-tls.yaml").write_text((DEPLOY / "dask" / "dask-tls.yaml").read_text())
    config = dask.config.collect(paths=[str(folder)], env={})
    with dask.config.set(dask.config.merge(dask.config.config, config)):
        sec = Security()
    assert sec.require_encryption and sec.tls_ca_file == "/etc/catdask/tls/ca.pem"
    assert sec.tls_client_cert.endswith("client.pem") and sec.tls_worker_key.endswith("-key.pem")


def test_dask_environment_variables_in_the_docs_are_dask_settings():
    pytest.importorskip("distributed")
    import dask.config

    names = set()
    for doc in [*DOCS, *(DEPLOY / "dask").glob("*.yaml")]:
        names |= set(re.findall(r"\bDASK_(DISTRIBUTED__[A-Z_]+?)(?:=|\b)", doc.read_text()))
    assert "DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__START" in names
    for name in names:
        if name.endswith("_"):  # an elided name such as ..._TLS__CLIENT__CERT
            continue
        key = ".".join(part.lower().replace("_", "-") for part in name.split("__"))
        assert dask.config.get(key, default=KeyError) is not KeyError, f"DASK_{name}"


def test_jobqueue_recipe_uses_dask_jobqueue_slurm_keys():
    """dask-jobqueue is not a dependency: its SLURM keys (jobqueue.yaml of dask-jobqueue
    0.9) are listed here."""
    known = {"name", "cores", "memory", "processes", "python", "interface", "death-timeout",
             "local-directory", "shared-temp-directory", "extra", "worker-command",
             "worker-extra-args", "shebang", "queue", "account", "walltime", "env-extra",
             "job-script-prologue", "job-cpu", "job-mem", "job-extra", "job-extra-directives",
             "job-directives-skip", "log-directory", "scheduler-options"}
    slurm = yaml.safe_load((DEPLOY / "dask" / "jobqueue-slurm.yaml").read_text())["jobqueue"]["slurm"]
    assert set(slurm) <= known, sorted(set(slurm) - known)
    assert slurm["processes"] == slurm["cores"]


def _commands(markdown: str, program: str):
    """Shell commands in the fenced blocks of ``markdown`` that run ``program``."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.S):
        for command in block.replace("\\\n", " ").splitlines():
            words = shlex.split(command, comments=True)
            words = [w for w in words if not re.match(r"^[A-Z_]+=", w)]
            if words[:2] == program.split():
                commands.append(words)
    return commands


def test_single_machine_dask_recipe_binds_loopback_only():
    """`dask scheduler --host 127.0.0.1` alone served its dashboard on 0.0.0.0:8787, and
    `dask worker tcp://127.0.0.1:8786` listened on every interface (checked with ss)."""
    text = (DEPLOY / "dask" / "README.md").read_text()
    schedulers = [c for c in _commands(text, "dask scheduler") if "127.0.0.1" in c]
    workers = [c for c in _commands(text, "dask worker") if c[2].startswith(("tcp://127.", "tls://127."))]
    assert schedulers and workers
    for command in schedulers:
        assert command[command.index("--host") + 1] == "127.0.0.1", command
        assert command[command.index("--dashboard-address") + 1].startswith("127.0.0.1:"), command
    for command in workers:
        assert command[command.index("--host") + 1] == "127.0.0.1", command
        assert command[command.index("--dashboard-address") + 1].startswith("127.0.0.1:"), command


# ---------------------------------------------------------------- scheduler addresses, as typed
@pytest.mark.parametrize("address, expect", [
    ("tpc://127.0.0.1:8786", "unknown scheme 'tpc'"),
    ("http://127.0.0.1:8786", "unknown scheme 'http'"),
    ("tcp:/127.0.0.1:8786", "expected SCHEME://HOST:PORT"),
])
def test_mistyped_scheduler_scheme_is_refused_before_anything_starts(address, expect):
    """A typo'd scheme used to pass the check (only tcp/tls were probed), start Prefect's
    temporary server and fail 7 s later with "the reply is not the Dask protocol"."""
    from catdask.cli import EXIT_INPUT
    from catdask.cli.exits import CliError
    from catdask.cli.runtime import check_scheduler

    with pytest.raises(CliError) as info:
        check_scheduler(address)
    assert info.value.code == EXIT_INPUT
    assert f"bad Dask scheduler address {address!r}" in str(info.value)
    assert expect in str(info.value)


def test_connect_scheduler_names_bad_schemes_and_missing_tls_settings(monkeypatch):
    """Dask's ValueError / TypeError for these read "the reply is not the Dask protocol";
    nothing is connected to (the port is closed)."""
    pytest.importorskip("distributed")
    import dask.config

    from catdask.distributed.cluster import address_problem, connect_scheduler
    from catdask.errors import SchedulerConnectionError

    with pytest.raises(SchedulerConnectionError, match="unknown scheme 'tpc'"):
        connect_scheduler("tpc://127.0.0.1:1")
    with dask.config.set({"distributed.comm.tls.ca-file": None,
                          "distributed.comm.tls.client.cert": None,
                          "distributed.comm.tls.client.key": None}):
        with pytest.raises(SchedulerConnectionError, match="tls:// needs TLS settings"):
            connect_scheduler("tls://127.0.0.1:1")
    assert address_problem("tcp://127.0.0.1:1") is None
    assert address_problem("127.0.0.1:8786") is None


def test_prefect_yaml_triggers_are_prefect_triggers_on_catdask_events():
    """The retrain trigger listens to the events the ingest flow emits, and passes the flow a
    parameter it takes (a trigger's parameters are not checked by `prefect deploy`)."""
    pytest.importorskip("prefect")
    from prefect.events import DeploymentEventTrigger

    from catdask.orchestration import events

    triggered = [d for d in _deployments() if d.get("triggers")]
    assert [d["name"] for d in triggered] == ["retrain-on-new-snapshot"]
    for deployment in triggered:
        flow = _load_entrypoint(deployment["entrypoint"])
        for spec in deployment["triggers"]:
            trigger = DeploymentEventTrigger(**{k: v for k, v in spec.items() if k != "type"})
            assert trigger.expect == {events.SNAPSHOT_CREATED, events.SNAPSHOT_REUSED}
            assert trigger.match["prefect.resource.id"] == ["catdask.dataset.*"]
            assert trigger.parameters == {"dataset": events.DATASET_FROM_EVENT}
            assert set(trigger.parameters) <= set(inspect.signature(flow.fn).parameters)
            # The template names a label every snapshot event's resource carries.
            label = re.search(r"resource\['([\w.]+)'\]", trigger.parameters["dataset"]).group(1)
            assert label in events.dataset_resource("iris")


def test_the_rejected_model_automation_example_is_a_prefect_automation():
    pytest.importorskip("prefect")
    from prefect.events.schemas.automations import AutomationCore

    from catdask.orchestration import events

    spec = importlib.util.spec_from_file_location(
        "_flag_rejected", DEPLOY / "automations" / "flag_rejected_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import uuid

    automation = module.automation(uuid.uuid4())
    assert isinstance(automation, AutomationCore)
    assert automation.trigger.expect == {events.MODEL_REJECTED}
    for label in re.findall(r"resource\['([\w.]+)'\]", module.SUBJECT + module.BODY):
        assert label in events.model_resource("m", None)
