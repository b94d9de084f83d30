"""Issue 21's docker-compose and Kubernetes findings, each checked offline against the files.

Every PLAUDIT_ variable the compose file, its env example and the manifests set must be a
setting Plaudit knows; placeholder keys must not start a public server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.core.errors import InvalidInput
from services.core.settings_check import known_variables
from services.core.web.auth import check_bind_allowed
from services.judge.app import check_fence_secret
from services.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "kubernetes" / "plaudit.yaml"


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))


def _plaudit(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services = compose["services"]
    return {n: s for n, s in services.items() if str(s.get("image", "")).startswith("plaudit")}


def _env_example() -> dict[str, str]:
    lines = (ROOT / "compose.env.example").read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if line and not line.startswith("#")]
    return {k: v for k, v in pairs}


def _k8s() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


# --- docker-compose ------------------------------------------------------------------------


def test_the_image_has_what_jobs_need() -> None:
    """KARMA training and simulator calibration import trl and datasets (the train extra)."""
    installs = re.findall(r"pip install '\.\[([a-z,]+)\]'", (ROOT / "Dockerfile").read_text())
    assert installs and {"serve", "train"} <= set(installs[0].split(","))


def test_only_called_roles_run_gateway_and_worker_share_data() -> None:
    """The gateway serves every service; a per-service container that nothing calls only
    loads its own judge model. Jobs run in the worker, so its data settings are the gateway's."""
    plaudit = _plaudit(_compose())
    commands = {name: spec["command"][:3] for name, spec in plaudit.items()}
    assert sorted(map(tuple, commands.values())) == sorted(
        [("plaudit", "db", "upgrade"), ("plaudit", "serve", "all"), ("plaudit", "worker")]
    ), commands
    gateway, worker = (
        next(s for s in plaudit.values() if s["command"][1] == role) for role in ("serve", "worker")
    )
    assert gateway.get("environment") == worker.get("environment")
    assert gateway["volumes"] == worker["volumes"]
    env = {**_env_example(), **(worker.get("environment") or {})}
    datasets = env.get("PLAUDIT_DATASETS_DIR", env["PLAUDIT_DATA_DIR"] + "/datasets")
    mounts = [v.split(":")[1] for v in worker["volumes"]]
    assert any(datasets.startswith(m) for m in mounts), (datasets, mounts)


def test_published_ports_do_not_clash_with_readme_ports() -> None:
    """README's vLLM quickstart serves the judge on the host's 8001; compose publishes 8000."""
    published = [
        str(port).split(":")[0]
        for spec in _compose()["services"].values()
        for port in spec.get("ports", [])
    ]
    assert published == ["8000"]


@pytest.mark.parametrize(
    "key",
    [
        "change-me-trainer-key",
        "replace-with-a-long-admin-key",
        "<your-trainer-key-here>",
        "placeholder-key-0000000000",
        "your-api-key-goes-here",
    ],
)
def test_placeholder_keys_do_not_start_a_public_server(key: str) -> None:
    settings = Settings(api_keys={key: ["reward"]})
    with pytest.raises(InvalidInput, match="placeholder"):
        check_bind_allowed(settings, "0.0.0.0")
    check_bind_allowed(settings, "127.0.0.1")
    check_bind_allowed(Settings(api_keys={"k9TqW2vXe3Lr8mZp4Ny7": ["reward"]}), "0.0.0.0")


def test_the_compose_example_keys_are_refused_until_changed() -> None:
    settings = Settings(_env_file=str(ROOT / "compose.env.example"))  # type: ignore[call-arg]
    with pytest.raises(InvalidInput, match="placeholder"):
        check_bind_allowed(settings, "0.0.0.0")


def test_the_compose_example_fence_secret_is_refused_until_changed() -> None:
    example = Settings(_env_file=str(ROOT / "compose.env.example"))  # type: ignore[call-arg]
    public = example.with_overrides(host="0.0.0.0")
    with pytest.raises(InvalidInput, match="FENCE_SECRET looks like a placeholder"):
        check_fence_secret(public)
    check_fence_secret(example.with_overrides(host="127.0.0.1"))
    check_fence_secret(public.with_overrides(judge_fence_secret="9f2c41d87e0b5a63c1d4"))


# --- Kubernetes ----------------------------------------------------------------------------


def test_applying_the_manifest_never_overwrites_the_secret() -> None:
    docs = _k8s()
    assert "Secret" not in {d["kind"] for d in docs}
    refs = {
        src["secretRef"]["name"]
        for d in docs
        if "template" in d.get("spec", {})
        for c in _pod(d).get("containers", []) + _pod(d).get("initContainers", [])
        for src in c.get("envFrom", [])
        if "secretRef" in src
    }
    assert refs == {"plaudit-secrets"}
    assert "create secret generic plaudit-secrets" in MANIFEST.read_text()


def test_the_documented_keys_have_the_scopes_readme_uses() -> None:
    """README scores with the admin key too: it needs reward as well as admin."""
    match = re.search(r"PLAUDIT_API_KEYS='(\{.*?\})'", MANIFEST.read_text())
    assert match is not None
    keys = json.loads(match.group(1))
    assert ["reward"] in keys.values() and ["reward", "admin"] in keys.values()


def test_vllm_runs_with_the_structured_output_setting() -> None:
    [vllm] = [
        c
        for d in _k8s()
        if d["kind"] == "Deployment"
        for c in _pod(d)["containers"]
        if c["image"].startswith("vllm/")
    ]
    args = vllm["args"]
    config = json.loads(args[args.index("--structured-outputs-config") + 1])
    assert config == {"backend": "xgrammar", "disable_any_whitespace": True}


def test_api_and_worker_wait_for_migrations_and_read_datasets_from_the_data_volume() -> None:
    docs = _k8s()
    config = next(d for d in docs if d["kind"] == "ConfigMap")["data"]
    assert config["PLAUDIT_DATASETS_DIR"].startswith(config["PLAUDIT_DATA_DIR"] + "/")
    for doc in docs:
        if doc["kind"] != "Deployment" or doc["metadata"]["name"] == "plaudit-vllm-judge":
            continue
        pod = _pod(doc)
        [wait] = pod["initContainers"]
        assert wait["command"][:3] == ["plaudit", "db", "wait"], doc["metadata"]["name"]
        [mount] = pod["containers"][0]["volumeMounts"]
        assert mount["mountPath"] == config["PLAUDIT_DATA_DIR"]


# --- every variable the deployment files set is a setting ----------------------------------


def _set_variables() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {"compose.env.example": set(_env_example())}
    for name, spec in _compose()["services"].items():
        env = spec.get("environment") or {}
        found[f"docker-compose.yml:{name}"] = {k for k in env if k.startswith("PLAUDIT_")}
    for doc in _k8s():
        if doc["kind"] == "ConfigMap":
            found[f"kubernetes:{doc['metadata']['name']}"] = set(doc["data"])
        if "template" in doc.get("spec", {}):
            for c in _pod(doc).get("containers", []) + _pod(doc).get("initContainers", []):
                found[f"kubernetes:{c['name']}"] = {e["name"] for e in c.get("env", [])}
    secret = re.findall(r"--from-literal=(PLAUDIT_[A-Z_]+)=", MANIFEST.read_text())
    found["kubernetes:plaudit-secrets (header)"] = set(secret)
    return found


def test_every_variable_the_deployment_files_set_is_a_known_setting() -> None:
    known = known_variables(Settings)
    unknown = {where: names - known for where, names in _set_variables().items() if names - known}
    assert unknown == {}
    assert "PLAUDIT_API_KEYS" in _set_variables()["kubernetes:plaudit-secrets (header)"]


def test_the_check_catches_a_misspelt_variable() -> None:
    assert "PLAUDIT_JUDGE_BASE_URL" in known_variables(Settings)
    assert "PLAUDIT_JUDGE_BASEURL" not in known_variables(Settings)
    assert "PLAUDIT_PROTOCOL_GROUP_TTL_S" not in known_variables(Settings)


def test_db_wait_waits_for_the_migration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from services.cli.main import app

    monkeypatch.setenv("PLAUDIT_DATA_DIR", str(tmp_path))
    runner = CliRunner()
    result = runner.invoke(app, ["db", "wait", "--timeout", "0"])
    assert result.exit_code == 1 and "not migrated" in result.output
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["db", "wait", "--timeout", "0"])
    assert result.exit_code == 0 and "database at head" in result.output
