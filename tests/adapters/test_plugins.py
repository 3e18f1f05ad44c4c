"""Adapters: the built-ins listed in code, third-party plugins through the ``trainpulse.adapters`` entry points."""

import logging
import re
import sys
from pathlib import Path

import pytest

from trainpulse_otel.adapters import Adapter
from trainpulse_otel.runtime import plugins

BUILTINS = {"generic", "pytorch", "deepspeed", "megatron", "huggingface", "lightning", "torchtitan"}


def test_builtins_load_without_autoload():
    adapters = plugins.load_adapters(autoload=False)
    assert set(adapters) == BUILTINS
    assert all(isinstance(a, Adapter) and a.name == name for name, a in adapters.items())
    assert {n for n, a in adapters.items() if a.translate_text} == {"megatron", "deepspeed", "torchtitan"}


def _install_plugin(root: Path, dist: str, entry_points: str, module: str, source: str) -> None:
    """A real (if minimal) installed distribution: a module plus its .dist-info."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[trainpulse.adapters]\n{entry_points}\n")


PLUGIN_SOURCE = """
from trainpulse_otel.adapters.base import Adapter, Fields

def translate(payload):
    fields = Fields.from_payload(payload)
    fields.set("step_time_ms", fields.number("jax_step_seconds") * 1000.0, "jax_step_seconds")
    return fields.finish("acme-jax")

ADAPTER = Adapter("acme", translate)

class ClassPlugin:
    def translate(self, payload):
        return {"tokens_per_sec": payload["tps"]}

NOT_AN_ADAPTER = 42
"""


GOOD = "acme = acme_adapter:ADAPTER\nacme-class = acme_adapter:ClassPlugin\nbroken = acme_missing_module:ADAPTER"


@pytest.fixture
def install(tmp_path, monkeypatch):
    def install(entry_points: str = GOOD) -> None:
        _install_plugin(tmp_path, "acme_trainpulse", entry_points, "acme_adapter", PLUGIN_SOURCE)
        monkeypatch.syspath_prepend(str(tmp_path))

    yield install
    sys.modules.pop("acme_adapter", None)


@pytest.fixture
def third_party(install):
    install()


def test_third_party_plugins_load_and_one_that_fails_to_import_is_logged_and_skipped(third_party, caplog):
    with caplog.at_level(logging.WARNING, logger="trainpulse_otel.runtime.plugins"):
        adapters = plugins.load_adapters(autoload=True)
    assert {"acme", "acme-class"} <= set(adapters) and "broken" not in adapters
    assert adapters["acme"].normalize({"jax_step_seconds": 1.25}).step_time_ms == 1250.0
    assert adapters["acme-class"].translate({"tps": 5.0}) == {"tokens_per_sec": 5.0}
    assert "plugin 'broken' (acme_missing_module:ADAPTER, trainpulse.adapters) failed to import" in caplog.text


@pytest.mark.parametrize(
    ("entry_points", "error"),
    [
        (
            "bogus = acme_adapter:NOT_AN_ADAPTER",
            "plugin 'bogus' (acme_adapter:NOT_AN_ADAPTER, trainpulse.adapters): 42",
        ),
        ("megatron = acme_adapter:ADAPTER", "the name 'megatron' is already taken by 'megatron' (built-in)"),
    ],
)
def test_a_plugin_that_is_no_adapter_or_takes_a_builtin_name_is_refused_by_name(install, entry_points, error):
    install(entry_points)
    with pytest.raises(plugins.PluginError, match=re.escape(error)):
        plugins.load_adapters(autoload=True)


def test_autoload_off_by_argument_or_environment_skips_third_party(third_party, monkeypatch):
    assert set(plugins.load_adapters(autoload=False)) == BUILTINS
    monkeypatch.setenv(plugins.AUTOLOAD_ENV, "1")
    assert set(plugins.load_adapters()) == BUILTINS
    monkeypatch.setenv(plugins.AUTOLOAD_ENV, "0")
    assert "acme" in plugins.load_adapters()


def test_without_any_installed_metadata_the_builtins_are_all_there(monkeypatch):
    monkeypatch.setattr(plugins, "entry_points", lambda group: [])
    assert set(plugins.load_adapters(autoload=True)) == BUILTINS


def test_the_autoload_variable_is_not_mistaken_for_a_setting():
    from trainpulse_otel.config import load_settings

    assert load_settings(environ={plugins.AUTOLOAD_ENV: "1"}).mode == "auto"
