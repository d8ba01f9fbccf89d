"""The wheel of ``calc`` alone: built offline by packaging/calc (a standard-library PEP 517
backend), installed into a fresh virtual environment that holds nothing else, and its console
entry point answering as ``python -m calc`` does."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO_ROOT

ROOT = REPO_ROOT
PACKAGING = ROOT / "packaging" / "calc"
ENTRY = "gpu-finetune-calc"


def _backend():
    spec = importlib.util.spec_from_file_location("calc_wheel", PACKAGING / "calc_wheel.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    return out / _backend().build_wheel(str(out))


def test_wheel_holds_calc_and_its_metadata_only(wheel):
    import calc

    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL"))
        assert wheel.name == f"gpu_finetune_calc-{calc.__version__}-py3-none-any.whl"
        assert {n.split("/")[0] for n in names} == {"calc", info}
        expected = sorted(
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / "calc").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )
        assert sorted(n for n in names if n.startswith("calc/")) == expected
        assert "calc/data/messages/es.json" in names and "calc/cli/app.py" in names
        # RECORD: every other file with its sha256 and size (PEP 376 / 427)
        record = archive.read(f"{info}/RECORD").decode().splitlines()
        rows = {line.split(",")[0]: line.split(",")[1:] for line in record}
        assert set(rows) == set(names)
        for name in names:
            if name.endswith("RECORD"):
                continue
            data = archive.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert rows[name] == [f"sha256={digest}", str(len(data))], name
        metadata = archive.read(f"{info}/METADATA").decode()
        assert "Name: gpu-finetune-calc" in metadata
        # nothing required; PyYAML only with the yaml extra (YAML training configs)
        requires = [
            line
            for line in metadata.splitlines()
            if line.startswith(("Requires-Dist", "Provides-Extra"))
        ]
        assert requires == ["Provides-Extra: yaml", 'Requires-Dist: PyYAML>=6.0; extra == "yaml"']
        assert archive.read(f"{info}/entry_points.txt").decode() == (
            "[console_scripts]\ngpu-finetune-calc = calc.cli:entry_point\n"
        )


def test_wheel_bytes_are_reproducible(wheel, tmp_path):
    again = tmp_path / _backend().build_wheel(str(tmp_path))
    assert again.read_bytes() == wheel.read_bytes()


def test_pip_builds_the_same_wheel_offline(wheel, tmp_path):
    """``pip wheel packaging/calc`` goes through the same backend, with no index and no build
    dependency to fetch."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            str(PACKAGING),
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert (tmp_path / wheel.name).read_bytes() == wheel.read_bytes()


def test_installed_entry_point_in_a_bare_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    # pip of this environment installs into the bare one (--python): no index, no network
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-index",
            "--no-deps",
            "--disable-pip-version-check",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert sorted(p.name for p in site.iterdir()) == [
        "calc",
        wheel.name.split("-py3")[0] + ".dist-info",
    ]
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }  # no PYTHONPATH: not the repository
    work = tmp_path / "elsewhere"
    work.mkdir()

    def run(*args, stdin=None):
        return subprocess.run(
            [str(venv / "bin" / ENTRY), *args],
            input=stdin,
            capture_output=True,
            cwd=work,
            env=env,
            timeout=120,
        )

    request = {"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096}
    here = subprocess.run(
        [sys.executable, "-m", "calc", "estimate", "--request", "-"],
        input=json.dumps(request).encode(),
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    there = run("estimate", "--request", "-", stdin=json.dumps(request).encode())
    assert there.returncode == 0 and there.stdout == here.stdout
    flags = run("estimate", "--model", "llama-3.1-8b", "--method", "qlora", "--seq-len", "4096")
    assert flags.stdout == here.stdout
    table = run(
        "plan",
        "--model",
        "llama-3.1-8b",
        "--method",
        "qlora",
        "--dataset-tokens",
        "1e7",
        "--gpu",
        "l4",
        "--table",
        "--lang",
        "es",
    )
    assert table.returncode == 0 and "Pico asignado" in table.stdout.decode()
    assert run("--help").stdout.decode().startswith(f"usage: {ENTRY}")
    bad = run("estimate", "--model", "nope")
    assert bad.returncode == 2 and json.loads(bad.stdout)["error"]["code"] == "unknown_preset"
    assert b"Traceback" not in bad.stderr
    where = subprocess.run(
        [str(python), "-c", "import calc; print(calc.__file__)"],
        capture_output=True,
        cwd=work,
        env=env,
        timeout=60,
    )
    assert where.stdout.decode().startswith(str(site))
    schema = run("schema", "plan")
    assert json.loads(schema.stdout)["required"] == ["model", "dataset_tokens", "gpu"]
    import calc
    from calc.cli.app import DIST_NAME

    version = run("--version")
    assert version.returncode == 0 and version.stdout.decode() == f"{ENTRY} {calc.__version__}\n"
    assert DIST_NAME == ENTRY
    # no PyYAML in this venv: a YAML config is refused, and the line says how to get the reader
    config = ROOT / "tests" / "configs" / "axolotl" / "qlora.yml"
    assert (
        subprocess.run([str(python), "-c", "import yaml"], capture_output=True, env=env).returncode
        == 1
    )
    for lang, words in (("en", "is not installed"), ("es", "no está instalado")):
        failed = run("estimate", "--config", str(config), "--table", "--lang", lang)
        line = failed.stderr.decode()
        assert failed.returncode == 2 and "[yaml_unavailable]" in line and words in line, line
        assert "pip install 'gpu-finetune-calc[yaml]'" in line and "Traceback" not in line
    piped = run("import", str(config))
    assert piped.returncode == 2 and json.loads(piped.stdout)["error"]["code"] == "yaml_unavailable"
    # the yaml extra names PyYAML: offline, pip finds the wheel and then asks for PyYAML
    extra = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-index",
            "--dry-run",
            "--disable-pip-version-check",
            f"{ENTRY}[yaml] @ {wheel.as_uri()}",
        ],
        capture_output=True,
        timeout=300,
    )
    assert extra.returncode != 0 and b"pyyaml>=6.0" in extra.stderr.lower(), extra.stderr.decode()


def test_sdist_rebuilds_the_same_wheel(wheel, tmp_path):
    """An sdist (pyproject, backend, package) builds the same wheel outside the repository."""
    import tarfile

    backend = _backend()
    sdist = tmp_path / backend.build_sdist(str(tmp_path))
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    top = next((tmp_path / "src").iterdir())
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(top / "calc_wheel.py"), "--out", str(out)],
        capture_output=True,
        cwd=top,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert (out / wheel.name).read_bytes() == wheel.read_bytes()
