"""deploy/setup, the user's install: it says what is missing, and installs the project with the
``http`` extra into a fresh virtual environment whose ``mesh`` then runs (the system packages
are there on this machine: .ci/setup installed them)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / "deploy" / "setup"


def run_setup(*args: str, venv: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VENV": str(venv)}
    return subprocess.run(
        [str(SETUP), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_check_says_what_is_missing_and_installs_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = run_setup("--check", venv=venv)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"setup: {venv} lacks the project with [http]" in done.stdout
    assert "missing mosquitto" not in done.stdout  # installed here
    assert not venv.exists()


def test_a_wrong_option_is_refused_with_the_right_ones(tmp_path: Path) -> None:
    done = run_setup("--chek", venv=tmp_path / "venv")
    assert done.returncode == 2
    assert "unknown option '--chek' (use --check or nothing)" in done.stderr


@pytest.mark.skipif(
    shutil.which("mosquitto") is None and not Path("/usr/sbin/mosquitto").exists(),
    reason="no Mosquitto here: deploy/setup would install it with the system's package manager",
)
def test_it_installs_a_venv_whose_mesh_runs_and_a_second_run_has_nothing_to_do(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    first = run_setup(venv=venv, timeout=600)
    assert first.returncode == 0, first.stderr
    assert f"setup: ready; run {venv}/bin/mesh up" in first.stderr
    mesh = venv / "bin" / "mesh"
    version = subprocess.run([mesh, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.startswith("mesh ")
    extra = "import starlette, uvicorn, agents, gateways.http"
    imports = subprocess.run([venv / "bin" / "python", "-c", extra], capture_output=True, text=True, timeout=60)
    assert imports.returncode == 0, imports.stderr  # the http extra is in
    check = run_setup("--check", venv=venv)
    assert check.returncode == 0 and "everything is there" in check.stdout, check.stdout
