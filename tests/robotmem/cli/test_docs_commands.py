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

Links: every ``[text](target)`` and ``![image](target)`` that is not a URL must name an
existing file, and a ``#fragment`` must match a heading of that file (GitHub's slug rules).

Options: every ``robotmem ...`` command in a shell fence (runnable or not) or an inline code
span names only options its command has, and every ``Memory`` method written as
``name(arg, ...)`` in the docs names only parameters that method has: the commands that
cannot run here (a live robot, a PostgreSQL server) drift too.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from robotmem import Memory
from robotmem.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
RUNNABLE_TAGS = {"bash", "sh", "shell"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(.*)$")
_NOT_RUNNABLE = re.compile(r"<!--\s*not runnable:(.*?)-->", re.IGNORECASE)
_PIP_INSTALL = re.compile(r"^\s*(python3? -m )?pip3? install\b")
_GUARD = "ROBOTMEM_RUNNING_DOCS"  # a block that starts pytest must not run these commands again
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


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


_SHELL_STOP = {"|", "||", "&&", ";", ">", ">>", "2>", "&", "<", "robotmem"}


def _command_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_options(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """``robotmem COMMAND --option`` for each option of ``words`` (what follows ``robotmem``) that
    the command it is given to does not have (prefixes count as unknown: the CLI refuses them)."""
    command, path, unknown, i = parser, ["robotmem"], [], 0
    while i < len(words) and words[i] not in _SHELL_STOP:
        word = words[i]
        if re.match(r"^--?[A-Za-z]", word):
            action = command._option_string_actions.get(word.split("=", 1)[0])
            if action is None:
                unknown.append(f"{' '.join(path)} {word.split('=', 1)[0]}")
                i += 1
            elif "=" in word or action.nargs == 0:
                i += 1
            elif action.nargs is None or isinstance(action.nargs, int):
                i += 1 + (1 if action.nargs is None else action.nargs)
            else:  # "+", "*": values up to the next option
                i += 1
                while i < len(words) and not words[i].startswith("-") and words[i] not in _SHELL_STOP:
                    i += 1
            continue
        children = _command_parsers(command)
        if word in children:
            command = children[word]
            path.append(word)
        i += 1
    return unknown


def robotmem_commands(document: Path) -> list[tuple[int, list[str]]]:
    """(line, words after ``robotmem``) of every command in a shell fence or an inline code span."""
    lines: list[tuple[int, str]] = []
    for block in fenced_blocks(document):
        if block.tag in RUNNABLE_TAGS:
            joined = block.body.replace("\\\n", " ")
            lines += [(block.line + 1 + n, line) for n, line in enumerate(joined.splitlines())]
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), document.read_text(encoding="utf-8"),
                   flags=re.DOTALL)
    lines += [(n, span) for n, line in enumerate(prose.splitlines(), 1) for span in re.findall(r"`([^`\n]+)`", line)]
    commands = []
    for number, line in lines:
        for match in re.finditer(r"(?<![\w/.-])robotmem((?:[ \t]+\S+)+)", line):
            try:
                words = shlex.split(match.group(1), comments=True)
            except ValueError:
                words = match.group(1).split()
            commands.append((number, words))
    return commands


def test_every_robotmem_option_the_docs_name_exists():
    parser = build_parser()
    unknown = [f"{_doc_id(d)}:{line}: {problem}" for d in DOCUMENTS for line, words in robotmem_commands(d)
               for problem in unknown_options(parser, words)]
    assert unknown == []


def test_the_option_check_reads_commands_values_and_prefixes():
    parser = build_parser()
    assert unknown_options(parser, shlex.split("--json recall 'a b' --near spatial.position 1 2 --filtr {}")) == [
        "robotmem recall --filtr"]
    assert unknown_options(parser, shlex.split("session list --limit 3 | head")) == []
    assert unknown_options(parser, ["recall", "cup", "--n", "3"]) == ["robotmem recall --n"]
    assert unknown_options(parser, ["bridge", "--url", "ws://h:9090", "--robot-id", "r1"]) == []


def test_every_memory_method_the_docs_call_names_its_own_parameters():
    wrong = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in re.finditer(r"`(?:mem\.)?(\w+)\(([^`]*)\)`", text):
            method = getattr(Memory, match.group(1), None)
            if not inspect.isfunction(method):
                continue
            parameters = set(inspect.signature(method).parameters) - {"self"}
            named = {part.split("=", 1)[0].strip() for part in match.group(2).split(",")}
            named = {name for name in named if re.fullmatch(r"[a-z_]\w*", name)}
            wrong += [f"{_doc_id(document)}: {match.group(1)}({name})" for name in sorted(named - parameters)]
    assert wrong == []
