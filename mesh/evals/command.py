"""What ``mesh eval FILE`` does (its arguments: :mod:`mesh.cli.eval_command`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mesh.cli.client_calls import connect
from mesh.cli.common import EXIT_OK
from mesh.errors import ConfigError
from mesh.evals.progress import ProgressBar
from mesh.evals.report import compare, load_baseline, table, to_json, to_junit
from mesh.evals.runner import run_suite
from mesh.evals.spec import load_suite

__all__ = ["EXIT_FAILED", "evaluate"]

#: Some case failed, or regressed from the baseline.
EXIT_FAILED = 1


async def evaluate(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise ConfigError(f"--repeat {args.repeat}: give a number of runs of at least 1")
    if args.concurrency is not None and args.concurrency < 1:
        raise ConfigError(f"--concurrency {args.concurrency}: give at least 1")
    suite = load_suite(args.file, agent=args.agent)
    baseline = load_baseline(args.baseline) if args.baseline is not None else None
    agents = {suite.agent_of(case, args.agent) for case in suite.cases}
    agents |= {case.expect.judge.agent for case in suite.cases if case.expect.judge is not None}
    async with connect(args) as client:
        for agent in sorted(agents):  # an unknown agent ends the run before any case is sent
            await client.wait_for_agent(agent, timeout=args.wait)
        with ProgressBar(len(suite.cases) * args.repeat) as bar:
            results = await run_suite(
                client, suite, agent=args.agent, repeat=args.repeat, concurrency=args.concurrency, on_result=bar.done
            )
    print(table(results))
    if args.json is not None:
        _write(args.json, json.dumps(to_json(results, args.file), indent=2, ensure_ascii=False).encode() + b"\n")
    if args.junit is not None:
        _write(args.junit, to_junit(results, args.file))
    regressed = False
    if baseline is not None:
        comparison = compare(results, baseline)
        print("\n".join(comparison.lines()))
        regressed = bool(comparison.regressions)
    return EXIT_FAILED if regressed or not all(r.passed for r in results) else EXIT_OK


def _write(path: Path, content: bytes) -> None:
    try:
        path.write_bytes(content)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write the report ({exc.strerror or exc}); give a writable path") from None
