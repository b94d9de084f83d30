"""The Kubernetes manifests, checked offline against the Kubernetes schemas and the real CLI."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer.main
import yaml

from services.cli.main import app
from services.core.settings_check import settings_variables
from services.settings import Settings
from tests.services.cli.test_main import _parse

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
K8S_VERSION = "1.33"


def _documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in MANIFESTS:
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return list(pod.get("initContainers", [])) + list(pod.get("containers", []))


def _setting_names() -> set[str]:
    return settings_variables(Settings)


def test_every_manifest_validates_against_the_kubernetes_schema() -> None:
    docs = _documents()
    assert {d["kind"] for d in docs} >= {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "ConfigMap",
        "Job",
    }
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_validator_rejects_a_broken_manifest() -> None:
    broken = copy.deepcopy(next(d for d in _documents() if d["kind"] == "Deployment"))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_plaudit_containers_run_real_commands_with_real_settings() -> None:
    docs = _documents()
    config = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("ConfigMap", "Secret")}
    known = _setting_names()
    for doc in docs:
        for container in _containers(doc):
            if not container["image"].startswith("plaudit"):
                continue
            command = container["command"]
            assert command[0] == "plaudit"
            _parse(typer.main.get_command(app), command[1:])
            for source in container.get("envFrom", []):
                if "secretRef" in source:  # created by the operator (the header says how)
                    assert source["secretRef"]["name"] == "plaudit-secrets"
                    continue
                assert source["configMapRef"]["name"] in config, source
    for item in config.values():
        values = item.get("data") or item.get("stringData") or {}
        assert set(values) <= known, set(values) - known


def test_serving_deployments_have_readiness_probes_and_a_gpu_judge() -> None:
    deployments = [d for d in _documents() if d["kind"] == "Deployment"]
    serving = [c for d in deployments for c in _containers(d) if c.get("ports")]
    assert serving and all("readinessProbe" in c for c in serving)
    gpus = [c["resources"]["limits"].get("nvidia.com/gpu") for c in serving]
    assert 1 in gpus, "a GPU vLLM judge"


def test_api_and_worker_share_one_read_write_many_data_volume() -> None:
    """A model a worker's job stored must be readable by every API replica: the data dir is one
    ReadWriteMany claim mounted by both, never a per-pod emptyDir."""
    docs = _documents()
    claims = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    mounted: dict[str, str] = {}
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        pod = doc["spec"]["template"]["spec"]
        for container in pod["containers"]:  # init containers need no data
            if not container["image"].startswith("plaudit"):
                continue
            [data] = [m for m in container["volumeMounts"] if m["mountPath"] == "/data"]
            [volume] = [v for v in pod["volumes"] if v["name"] == data["name"]]
            mounted[doc["metadata"]["name"]] = volume["persistentVolumeClaim"]["claimName"]
    assert len(mounted) >= 2 and len(set(mounted.values())) == 1, mounted
    claim = claims[next(iter(mounted.values()))]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
