"""What every benchmark shares: a broker, child processes, statistics, the JSON line.

Benchmarks run against a real Mosquitto: ``--broker URL`` (or ``MESH_BROKER_URL``) if given,
else one started here from the repository's mosquitto.conf, so that the broker settings
(TCP_NODELAY, queue limits) are the project's own. Progress goes to stderr; the last line on
stdout is the JSON result. Agents keep their task stores (SQLite, the default) in a temporary
directory of the run's, which their child processes inherit.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from mesh.brokertools.localbroker import running_broker

ROOT = Path(__file__).resolve().parent.parent

if "MESH_STATE_DIR" not in os.environ:  # a benchmark leaves no task files behind
    _state_dir = tempfile.mkdtemp(prefix="mesh-bench-")
    os.environ["MESH_STATE_DIR"] = _state_dir
    atexit.register(shutil.rmtree, _state_dir, ignore_errors=True)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def emit(result: dict[str, object]) -> None:
    """Print the result as the last line on stdout."""
    print(json.dumps(result, sort_keys=False), flush=True)


def base_arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--broker",
        default=os.environ.get("MESH_BROKER_URL"),
        help="MQTT broker URL (default: start Mosquitto from mosquitto.conf)",
    )
    return parser


@contextlib.contextmanager
def broker_url(explicit: str | None) -> Iterator[str]:
    if explicit:
        yield explicit
        return
    with running_broker(prefer="binary") as broker:
        progress(f"started Mosquitto from mosquitto.conf at {broker.url}")
        yield broker.url


@contextlib.contextmanager
def child(args: Sequence[str], ready_line: str = "ready", timeout: float = 30.0) -> Iterator[subprocess.Popen[str]]:
    """Run ``python args...`` and wait for it to print ``ready_line``; stop it afterwards."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        while True:
            line = proc.stdout.readline()
            if line.strip() == ready_line:
                break
            if not line and proc.poll() is not None:
                raise RuntimeError(f"{args} exited with {proc.returncode} before it was ready")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{args} was not ready within {timeout:g} s")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def report_profile(path: str, name: str, top: int = 30) -> None:
    """The top functions of a cProfile stats file (by own time, then cumulative) to stderr."""
    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    progress(f"{name} profile ({path}):\n{out.getvalue()}")


def median_us(samples_s: Sequence[float]) -> float:
    return round(statistics.median(samples_s) * 1e6, 1)


def p99_us(samples_s: Sequence[float]) -> float:
    ordered = sorted(samples_s)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6, 1)


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 3) if denominator else float("inf")


def secured_figures(secured: dict[str, float], opened: dict[str, float]) -> dict[str, object]:
    """The ``--secured`` figures of a bench: the secured default's and the open one's, measured in
    turns, and their ratios."""
    return {
        "secured_rtt_us": secured["rtt_us"],
        "secured_rps": secured["rps"],
        "secured_p99_us": secured["p99_us"],
        "secured_open_rtt_us": opened["rtt_us"],
        "secured_open_rps": opened["rps"],
        "secured_rtt_ratio": ratio(secured["rtt_us"], opened["rtt_us"]),
        "secured_rps_ratio": ratio(secured["rps"], opened["rps"]),
    }


@contextlib.contextmanager
def secured_broker(identities: Sequence[tuple[str, str, str]]) -> Iterator[dict[str, str]]:
    """A Mosquitto of its own under the generated rules of ``identities`` ((kind, name, namespace)),
    as the secured ``mesh up`` runs it; yields each name's URL with its own user and password."""
    from urllib.parse import quote

    from mesh.brokertools.brokerfiles import local_broker_config, write_broker_files
    from mesh.brokertools.brokerrules import Identity
    from mesh.brokertools.localbroker import LocalBroker, default_config_path, free_port
    from mesh.config.credentials import read_credentials

    with tempfile.TemporaryDirectory(prefix="mesh-bench-secured-") as directory:
        files = write_broker_files(Path(directory), [Identity(k, n, ns) for k, n, ns in identities])  # type: ignore[arg-type]
        extra, copied = local_broker_config(files)
        broker = LocalBroker(default_config_path(), port=free_port(), extra_config=extra)
        try:
            broker.start()
            progress(f"started Mosquitto under the mesh's rules at {broker.url}")
            passwords = read_credentials(files.passwords)
            host = broker.url.removeprefix("mqtt://")
            yield {name: f"mqtt://{name}:{quote(password, safe='')}@{host}" for name, password in passwords.items()}
        finally:
            broker.remove()
            if copied is not None:
                shutil.rmtree(copied, ignore_errors=True)


#: Rounds of the secured/open comparison: each side measured in turn (A, B, A, B, ...), so a
#: machine whose load changes during the run weighs on both alike.
SECURED_ROUNDS = 3


def interleaved_rounds(
    first: Callable[[int, int], dict[str, float]],
    second: Callable[[int, int], dict[str, float]],
    requests: int,
    concurrent_requests: int,
    rounds: int = SECURED_ROUNDS,
    names: tuple[str, str] = ("open", "secured"),
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Each side's figures in ``rounds`` rounds of ``requests / rounds`` sequential and
    ``concurrent_requests / rounds`` concurrent requests, the sides taking turns and swapping
    who goes first every round (A B, B A, ...), so that a change in the machine's load weighs
    on both alike: (first's rounds, second's rounds)."""
    per, per_concurrent = max(1, requests // rounds), max(1, concurrent_requests // rounds)
    measured: tuple[list[dict[str, float]], list[dict[str, float]]] = ([], [])
    sides = list(zip(names, (first, second), measured, strict=True))
    for number in range(1, rounds + 1):
        for name, side, runs in sides if number % 2 else sides[::-1]:
            figures = side(per, per_concurrent)
            progress(f"round {number}/{rounds}, {name}: {figures}")
            runs.append(figures)
    return measured


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """The median of each figure over ``runs``."""
    return {key: statistics.median(f[key] for f in runs) for key in runs[0]}


def paired_ratio(numerators: list[dict[str, float]], denominators: list[dict[str, float]], key: str) -> float:
    """The median over the rounds of ``numerator[key] / denominator[key]`` measured in the same
    round: a slow spell of the machine lowers both sides of a round, not one side's median."""
    return round(statistics.median(n[key] / d[key] for n, d in zip(numerators, denominators, strict=True)), 3)
