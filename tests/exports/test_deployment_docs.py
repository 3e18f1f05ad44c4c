"""docs/deployment.md stays runnable: its manifests hang together, its script parses, its variables exist."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import opentelemetry.sdk.environment_variables as otel_variables
import pytest
import yaml

from trainpulse_otel.config import ENV_PREFIX, NON_SETTING_ENV, OPTIONS_BY_KEY

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deployment.md"
ENV_EXAMPLE = ROOT / "packaging" / "systemd" / "env.example"
GATEWAY = ROOT / "collector_config" / "otelcol" / "job-gateway.yaml"
BLOCK = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)
KINDS = {
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
}
#: Variables read by the Collector configs (job-gateway.yaml, logs.yaml), the in-process client or the CLI, not
#: settings keys: the daemon ignores them (config.NON_SETTING_ENV).
OTHER_TRAINPULSE_VARIABLES = {
    "TRAINPULSE_ENDPOINT",
    "TRAINPULSE_CONFIG",
    "TRAINPULSE_JOB_DAEMON",
    "TRAINPULSE_LOG_GLOB",
    "TRAINPULSE_NODE_NAME",
}
VARIABLE = re.compile(r"\b((?:OTEL|TRAINPULSE)_[A-Z_]+[A-Z])\b")
REFERENCE = re.compile(r"\$\(([A-Z_]+)\)")


def blocks(lang: str) -> list[str]:
    return [m["body"] for m in BLOCK.finditer(DOC.read_text(encoding="utf-8")) if m["lang"] == lang]


def yaml_documents() -> list[dict]:
    return [doc for body in blocks("yaml") for doc in yaml.safe_load_all(body) if isinstance(doc, dict)]


def manifests() -> list[dict]:
    return [doc for doc in yaml_documents() if "kind" in doc]


def containers(obj: dict) -> list[dict]:
    return obj["spec"]["template"]["spec"]["containers"] if obj["kind"] in ("DaemonSet", "Deployment") else []


def test_every_yaml_block_parses_and_every_object_is_a_real_kind():
    objects = manifests()
    assert {obj["kind"] for obj in objects} >= {"DaemonSet", "Deployment", "Service", "ClusterRole"}
    for obj in objects:
        assert (obj["apiVersion"], obj["kind"]) in KINDS, (obj["apiVersion"], obj["kind"])
        assert obj["metadata"]["name"]


def test_workloads_select_their_own_pods_and_services_reach_them():
    objects = manifests()
    workloads = [obj for obj in objects if containers(obj)]
    for obj in workloads:
        assert obj["spec"]["selector"]["matchLabels"].items() <= obj["spec"]["template"]["metadata"]["labels"].items()
    for service in (obj for obj in objects if obj["kind"] == "Service"):
        targets = [
            w for w in workloads if service["spec"]["selector"].items() <= w["spec"]["selector"]["matchLabels"].items()
        ]
        assert len(targets) == 1, service["metadata"]["name"]
        port_names = {p.get("name") for c in containers(targets[0]) for p in c.get("ports", [])}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names


def test_container_variables_are_defined_before_they_are_referenced():
    """Kubernetes expands $(NAME) only from variables defined earlier in the same env list."""
    snippets = [doc for doc in yaml_documents() if "env" in doc]  # a training pod's env, shown alone
    assert snippets
    for container in [c for obj in manifests() for c in containers(obj)] + snippets:
        defined: set[str] = set()
        for variable in container["env"]:
            assert set(REFERENCE.findall(str(variable.get("value", "")))) <= defined, variable
            defined.add(variable["name"])
        assert set(REFERENCE.findall(" ".join(container.get("command", [])))) <= defined


def test_the_gateway_deployment_gives_the_gateway_every_variable_it_needs():
    required = set(re.findall(r"\$\{env:([A-Z_]+)\}", GATEWAY.read_text(encoding="utf-8")))  # those without a default
    gateway = next(obj for obj in manifests() if obj["metadata"]["name"] == "trainpulse-gateway" and containers(obj))
    given = {variable["name"] for c in containers(gateway) for variable in c.get("env", [])}
    assert required == {"TRAINPULSE_AUTH_TOKEN", "DD_API_KEY"} and required <= given


BASH = shutil.which("bash")


@pytest.mark.skipif(BASH is None, reason="no bash")
def test_the_sbatch_script_parses_and_runs_one_node_daemon_per_node():
    (script,) = [body for body in blocks("bash") if body.startswith("#!/bin/bash\n#SBATCH")]
    result = subprocess.run([BASH, "-n"], input=script, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "srun --overlap --ntasks-per-node=1" in script
    (on_each_node,) = re.findall(r"bash -c '(.*?)'", script, re.DOTALL)  # single quotes: expanded on the node
    assert "host.name=$(hostname)" in on_each_node and "exec trainpulse daemon" in on_each_node
    assert "-mode none" in script and "slurm.job.id=$SLURM_JOB_ID" in script


def test_the_daemon_ignores_the_variables_other_parts_read():
    assert OTHER_TRAINPULSE_VARIABLES <= NON_SETTING_ENV  # else a daemon started beside a collector refuses them


def test_every_variable_named_is_one_trainpulse_or_the_sdk_reads():
    known = {name for name in dir(otel_variables) if name.startswith("OTEL_")}
    known |= {ENV_PREFIX + key.upper() for key in OPTIONS_BY_KEY} | OTHER_TRAINPULSE_VARIABLES
    for path in (DOC, ENV_EXAMPLE):
        named = set(VARIABLE.findall(path.read_text(encoding="utf-8")))
        assert named and named <= known, (path.name, named - known)


def test_the_environment_file_example_sets_only_plain_assignments():
    lines = [line for line in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    assert lines and all(re.fullmatch(r"[A-Z_]+=\S+", line) for line in lines), lines


def test_the_deployment_page_is_linked():
    for page in ("README.md", "docs/operations.md", "docs/integrations.md"):
        assert "deployment.md" in (ROOT / page).read_text(encoding="utf-8"), page
