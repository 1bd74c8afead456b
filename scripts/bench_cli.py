"""Start-up time of the `robotmem` command line, hyperfine-style: repeated runs, p50/p90/min.

    python scripts/bench_cli.py [--runs 15] [--warmup 2] [--reference DIR]

Each command runs as a fresh process (the console script next to this interpreter, or
``python -m robotmem``) on a temporary ROBOTMEM_HOME holding the demo episode. Wall time
is what a user waits; CPU time (user + sys of the child) is printed too because it moves
less when the machine is shared. ``python -c pass`` is the floor any Python command pays.
``--reference DIR`` also times every command with PYTHONPATH=DIR (an older checkout of
robotmem and bridges, e.g. from ``git archive``), interleaved, for a comparison in one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS: list[tuple[str, list[str]]] = [
    ("robotmem --help", ["--help"]),
    ("robotmem stats", ["stats"]),
    ("robotmem session list", ["session", "list"]),
    ("robotmem recall bottle", ["recall", "bottle"]),
]


def robotmem_command() -> list[str]:
    script = Path(sys.executable).parent / "robotmem"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "robotmem"]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(label: str, argv: list[str], env: dict[str, str], runs: int, warmup: int) -> None:
    """Print wall p50/p90/min and CPU p50 of ``runs`` runs."""
    for _ in range(warmup):
        timed(argv, env)
    walls, cpus = zip(*(timed(argv, env) for _ in range(runs)))
    ordered = sorted(walls)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    print(f"{label:<28} wall p50 {statistics.median(walls) * 1000:7.0f} ms  p90 {p90 * 1000:7.0f} ms  "
          f"min {ordered[0] * 1000:7.0f} ms   cpu p50 {statistics.median(cpus) * 1000:7.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15, help="measured runs per command (default 15)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs first (default 2)")
    parser.add_argument("--reference", type=Path, metavar="DIR", help="also time the code in DIR (PYTHONPATH)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, ROBOTMEM_HOME=home)
        env.setdefault("ROBOTMEM_MODELS_DIR", str(Path.home() / ".robotmem" / "models"))
        base = robotmem_command()
        subprocess.run([*base, "demo"], env=env, stdout=subprocess.DEVNULL, check=True)
        print(f"{args.runs} runs each after {args.warmup} warm-up runs; {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}; command: {' '.join(base)}")
        measure("python -c pass (floor)", [sys.executable, "-c", "pass"], env, args.runs, args.warmup)
        reference = None
        if args.reference is not None:
            reference = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [str(args.reference.resolve()),
                                                                             env.get("PYTHONPATH")])))
        for label, argv in COMMANDS:
            measure(label, [*base, *argv], env, args.runs, args.warmup)
            if reference is not None:
                measure(f"  reference: {label[9:]}", [*base, *argv], reference, args.runs, args.warmup)


if __name__ == "__main__":
    main()
