"""robotmem memory purge: a dry run counts, deleting takes --yes, bad input names the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robotmem.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _stats(capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    code, out, _ = run(capsys, "stats", "--json")
    assert code == 0
    return {"perceptions": json.loads(out)["perceptions"], "facts": json.loads(out)["facts"]}


def test_purge_counts_then_deletes_with_yes(capsys: pytest.CaptureFixture[str], robotmem_home: Path) -> None:
    from robotmem import Memory

    with Memory(embedder=None, clock=lambda: 1_700_000_000.0) as mem:
        for i in range(3):
            mem.save_perception(f"camera frame {i} of the bench", collection="arm")
        mem.learn("the bench is 80 cm high", collection="arm")
    before = _stats(capsys)
    code, out, _ = run(capsys, "memory", "purge", "--before", "2024-01-01T00:00:00Z", "--dry-run", "--json")
    assert code == 0 and json.loads(out)["would_purge"] == 3
    code, _, err = run(capsys, "memory", "purge", "--before", "2024-01-01")
    assert code == 1 and "(--yes)" in err and "3 perceptions" in err
    assert _stats(capsys) == before
    code, out, _ = run(capsys, "memory", "purge", "--before", "2024-01-01", "--collection", "arm", "--yes", "--json")
    assert code == 0 and json.loads(out)["purged"] == 3
    assert _stats(capsys) == {"perceptions": 0, "facts": 1}


@pytest.mark.parametrize(("argv", "field"), [
    (("--before", "last tuesday"), "before"),
    (("--before", "2024-01-01", "--collection", "nosuch"), "collection"),
])
def test_bad_input_names_the_field(capsys: pytest.CaptureFixture[str], robotmem_home: Path,
                                   argv: tuple[str, ...], field: str) -> None:
    run(capsys, "learn", "the bench is 80 cm high")
    code, _, err = run(capsys, "memory", "purge", *argv, "--dry-run")
    assert code == 1 and err.startswith(f"error ({field}):")
