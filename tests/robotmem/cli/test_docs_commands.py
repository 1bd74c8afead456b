"""Every shell command in README.md and docs/ runs as written; every relative link resolves.

The convention (also on the team notice board):

- Fenced blocks tagged ```bash, ```sh or ```shell are runnable. Each document's runnable
  blocks run in order, with ``bash -e`` (stop at the first failing line), in one fresh
  temporary ROBOTMEM_HOME per document and in a scratch folder that links to the
  repository's top-level entries (so ``datasets/...`` works and written files land in the
  scratch folder).
- ``pip install`` steps are skipped: the test environment has everything installed.
- A block that must not run (it needs a live robot or server, runs for ever, or re-runs the
  test suite) carries ``<!-- not runnable: REASON -->`` on the line just above its fence.
  The reason is required.
- Output or sketches go in ```text (or an untagged fence), which never runs.
- Keep runnable commands quick (seconds): this test runs them all.

Links: every ``[text](target)`` that is not a URL must name an existing file, and a
``#fragment`` must match a heading of that file (GitHub's slug rules).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
RUNNABLE_TAGS = {"bash", "sh", "shell"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(.*)$")
_NOT_RUNNABLE = re.compile(r"<!--\s*not runnable:(.*?)-->", re.IGNORECASE)
_PIP_INSTALL = re.compile(r"^\s*(python3? -m )?pip3? install\b")
_GUARD = "ROBOTMEM_RUNNING_DOCS"  # a block that starts pytest must not run these commands again
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


@dataclass
class Block:
    document: Path
    line: int  # 1-based line of the opening fence
    tag: str
    body: str
    not_runnable: str | None  # the reason, when marked


def fenced_blocks(document: Path) -> list[Block]:
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, tag = match.group(1), match.group(2), match.group(3).lower()
        previous = lines[i - 1] if i else ""
        marker = _NOT_RUNNABLE.search(previous)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        blocks.append(Block(document, i + 1, tag, "\n".join(body),
                            marker.group(1).strip() if marker else None))
        i = j + 1
    return blocks


def runnable_script(blocks: list[Block]) -> str:
    """One bash script: the runnable blocks in order, ``pip install`` steps dropped."""
    parts = []
    for block in blocks:
        if block.tag not in RUNNABLE_TAGS or block.not_runnable is not None:
            continue
        commands = []
        for line in block.body.splitlines():
            steps = [step for step in line.split(" && ") if not _PIP_INSTALL.match(step)]
            commands.append(" && ".join(steps) if steps else ":")
        parts.append(f"# {block.document.name}:{block.line}\n" + "\n".join(commands))
    return "\n".join(parts)


def _scratch_folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (work / entry.name).symlink_to(entry)
    return work


def _doc_id(document: Path) -> str:
    return str(document.relative_to(ROOT))


@pytest.mark.parametrize("document", [d for d in DOCUMENTS if runnable_script(fenced_blocks(d))], ids=_doc_id)
def test_every_runnable_command_runs_as_written(document: Path, tmp_path: Path, robotmem_home: Path):
    if os.environ.get(_GUARD):
        pytest.skip("already inside a documented command (a runnable block started pytest)")
    script = runnable_script(fenced_blocks(document))
    env = dict(os.environ, ROBOTMEM_HOME=str(robotmem_home), **{_GUARD: "1"},
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=_scratch_folder(tmp_path),
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{_doc_id(document)}:\n{script}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def test_not_runnable_blocks_give_a_reason():
    unexplained = [f"{_doc_id(b.document)}:{b.line}" for d in DOCUMENTS for b in fenced_blocks(d)
                   if b.not_runnable is not None and not b.not_runnable]
    assert unexplained == []


def test_the_block_parser_reads_tags_markers_and_skips_pip(tmp_path: Path):
    doc = tmp_path / "x.md"
    doc.write_text("```bash\npip install x && robotmem stats\n```\n<!-- not runnable: needs ROS -->\n"
                   "```sh\nroslaunch a b\n```\n  ```bash\n  robotmem demo\n  ```\n```text\nout\n```\n")
    blocks = fenced_blocks(doc)
    assert [(b.tag, b.not_runnable) for b in blocks] == [("bash", None), ("sh", "needs ROS"), ("bash", None),
                                                         ("text", None)]
    script = runnable_script(blocks)
    assert "robotmem stats" in script and "robotmem demo" in script
    assert "pip install" not in script and "roslaunch" not in script and "out" not in script.split("\n")


def github_slug(heading: str) -> str:
    # GitHub keeps underscores (`min_relevance` -> min_relevance); backticks and stars go
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    in_fence = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading and not in_fence:
            slug = github_slug(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _links(document: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", document.read_text(encoding="utf-8"), flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return _LINK.findall(text)


def test_every_relative_link_resolves():
    broken = []
    for document in DOCUMENTS:
        for target in _links(document):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            path_part, _, fragment = target.partition("#")
            resolved = (document.parent / path_part).resolve() if path_part else document
            if not resolved.exists():
                broken.append(f"{_doc_id(document)}: {target} (no such file)")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                broken.append(f"{_doc_id(document)}: {target} (no such heading)")
    assert broken == []


def test_the_slug_rules_match_github():
    assert github_slug("Precision: fp32 (default) and int8") == "precision-fp32-default-and-int8"
    assert github_slug("MCP server") == "mcp-server"
    assert github_slug("`robotmem ui`") == "robotmem-ui"
    assert github_slug("Choosing `min_relevance`") == "choosing-min_relevance"
