"""The memory verbs: recall, learn, forget, update, memory get, memory purge, stats, export, import, reindex, demo."""

from __future__ import annotations

import argparse
import io
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ValidationError
from ..models import DEFAULT_MIN_RELEVANCE
from .output import emit, format_bytes, human_lines, progress_bar, truncate
from .store import open_existing, open_memory

__all__ = ["add_near_options", "near_target", "register"]


def near_target(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--near FIELD X Y [Z]`` (with ``--max-distance`` and ``--frame``) as a spatial_sort."""
    if not args.near:
        # A radius or a frame around nothing: dropping it would widen the answer unasked.
        for option, value in (("--max-distance", args.max_distance), ("--frame", args.frame)):
            if value is not None:
                raise ValidationError(f"{option} needs --near FIELD X Y [Z] to measure from", field=option)
        return None
    field, *xyz = args.near
    try:
        target = [float(v) for v in xyz]
    except ValueError as exc:
        raise ValidationError(f"--near takes FIELD X Y [Z] with numbers: {exc}", field="--near") from exc
    spatial: dict[str, Any] = {"field": field, "target": target}
    if args.max_distance is not None:
        spatial["max_distance"] = args.max_distance
    if args.frame is not None:
        spatial["frame"] = args.frame
    return spatial


def add_near_options(parser: argparse.ArgumentParser, near_help: str) -> None:
    """--near, --max-distance and --frame: recall and outcomes take the same three."""
    parser.add_argument("--near", nargs="+", metavar=("FIELD", "X"), help=near_help)
    parser.add_argument("--max-distance", type=float, metavar="M", help="with --near: only within this distance")
    parser.add_argument("--frame", metavar="NAME",
                        help="with --near: compare only points in this frame (the frame key beside FIELD, "
                             "spatial.frame for spatial.position); points in another frame rank last "
                             "(recall) or are left out (with --max-distance, and by outcomes)")


def cmd_recall(args: argparse.Namespace) -> Any:
    from .. import validation

    # Arguments are checked before the store is looked for: a bad --filter is named as such.
    spatial = near_target(args)
    context_filter = None if args.filter is None else validation.json_value(args.filter, "context_filter")
    with open_existing(args, embedder="auto") as mem:
        return mem.recall(args.query, n=args.n, min_confidence=args.min_confidence, session_id=args.session,
                          context_filter=context_filter, spatial_sort=spatial, since=args.since, until=args.until,
                          min_relevance=args.min_relevance)


def render_recall(result: dict[str, Any]) -> Iterator[str]:
    yield f"{result.get('count', len(result['results']))} results ({result.get('mode')})"
    if not result["results"] and result.get("mode") != "filter_only":
        yield "nothing relevant (see --min-relevance)"
    for hit in result["results"]:
        extra = f"  {hit['distance']:.3f} m" if hit.get("distance") is not None else ""
        kind = hit.get("perception_type") or hit["type"]
        yield f"#{hit['id']:<6} {_relevance(hit.get('relevance'))}{extra}  [{kind}]  {truncate(hit['content'], 160)}"


def _relevance(value: float | None) -> str:
    """``relevance 0.87 strong``: the number and a word a person can act on; none without a query."""
    if value is None:
        return "relevance  -         "
    word = "strong" if value >= 0.7 else "fair" if value >= 0.4 else "weak"
    return f"relevance {value:.2f} {word:<6}"


def cmd_learn(args: argparse.Namespace) -> Any:
    with open_memory(args) as mem:
        return mem.learn(args.insight, context=args.context, session_id=args.session)


def cmd_forget(args: argparse.Namespace) -> Any:
    with open_existing(args) as mem:
        return mem.forget(args.memory_id, args.reason)


def cmd_update(args: argparse.Namespace) -> Any:
    with open_existing(args, embedder="auto") as mem:
        return mem.update(args.memory_id, args.new_content, context=args.context)


def cmd_get(args: argparse.Namespace) -> Any:
    with open_existing(args) as mem:
        if not args.data:
            return mem.get(args.memory_id)
        data = mem.get_data(args.memory_id)
    if data is not None:
        return data
    # main() prints nothing for None, which is not JSON: --json gets null (what get_data returns), people a sentence.
    emit(None, args.json, lambda _: iter([f"memory {args.memory_id} has no data payload "
                                          "(only perceptions saved with data have one)"]))
    return 0


def cmd_purge(args: argparse.Namespace) -> Any:
    with open_existing(args) as mem:
        # Deleting for good takes --yes; without it the count is shown and nothing is deleted.
        if args.dry_run or not args.yes:
            counted = mem.purge_perceptions(args.before, collection=args.collection, session_id=args.session,
                                            dry_run=True)
            if args.dry_run:
                return counted
            raise ValidationError(f"this deletes {counted['would_purge']} perceptions for good; add --yes to "
                                  "delete them, or --dry-run to only count them", field="--yes")
        return mem.purge_perceptions(args.before, collection=args.collection, session_id=args.session)


def cmd_stats(args: argparse.Namespace) -> Any:
    # "auto" names the model recall would use without loading it (the model loads on first embed).
    with open_existing(args, embedder="auto") as mem:
        return mem.stats(collection=args.collection)


def render_stats(stats: dict[str, Any]) -> Iterator[str]:
    yield f"store: {stats['path']} ({format_bytes(stats['file_bytes'])}, schema version {stats['schema_version']})"
    yield (f"memories: {stats['memories']} ({stats['facts']} facts, {stats['perceptions']} perceptions), "
           f"sessions: {stats['sessions']}, payloads: {format_bytes(stats['payload_bytes'])}")
    yield f"embedding model: {stats['embedding_model'] or 'none (full-text recall only)'}"
    vectors = ", ".join(f"{count} {model}" for model, count in stats["embeddings"].items())
    yield f"vectors: {vectors or 'none'}"
    active = stats["embedding_model"]
    others = [model for model in stats["embeddings"] if active is not None and model != active]
    if others:
        # Recall compares only the active model's vectors: a server of a fleet configured with
        # another embedding_model writes memories this one finds by full text only (docs/fleet.md).
        yield (f"warning: recall with {active} does not compare the vectors of {', '.join(others)} (those memories "
               "are found by full text only); give every server of this store the same embedding_model, "
               "or `robotmem reindex --replace-other-models`")
    for index in stats.get("vector_indexes", []):
        yield _snapshot_line(index)
    for name, entry in stats["collections"].items():
        sessions = entry.get("sessions") or {}
        statuses = ", ".join(f"{count} {status}" for status, count in sorted(entry["by_status"].items()))
        yield (f"collection {name}: {entry['facts']} facts, {entry['perceptions']} perceptions, "
               f"{sessions.get('open', 0)} open / {sessions.get('ended', 0)} ended sessions"
               + (f" ({statuses})" if statuses else ""))


def _snapshot_line(index: dict[str, Any]) -> str:
    head = f"vector index of {index['collection']} ({index['model_id']}, {index['vectors']:,} vectors): "
    if index["kind"] == "hnsw":
        state = ("HNSW left unbuilt by a bulk load, recall scans exactly; `robotmem reindex` builds it"
                 if not index["built"] else
                 "HNSW, built by an older robotmem: it also holds superseded and forgotten memories' vectors, "
                 "which slow recall; `robotmem reindex` rebuilds it without them" if index["stale"] else "HNSW, built")
        return head + state + ("; being built now" if index["building"] else "")
    if not index["built"]:
        return head + ("none yet, being built now" if index["building"] else
                       "none yet, recall scans exactly; the next recall or `robotmem reindex` writes it")
    state = f"{index['changes_since']:,} changes since it was written" + (", stale" if index["stale"] else "")
    return head + state + ("; being rebuilt now" if index["building"] else "")


#: ``robotmem export -`` / ``import -``: standard output / input (``./-`` is a file named ``-``).
STDIO = "-"


def cmd_export(args: argparse.Namespace) -> Any:
    to_stdout = args.file == STDIO or _is_stdout(args.file)
    with _stopped_by_sigterm(), open_existing(args) as mem:
        if args.file == STDIO:
            # Bytes as UTF-8 whatever the locale's encoding; flushed, then handed back undisturbed.
            stream = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="\n")
            try:
                result = mem.export(stream)
            finally:
                stream.detach()
        else:
            result = mem.export(args.file)
    if not to_stdout:
        return result
    # The file is standard output: the summary goes to stderr, so stdout holds only the JSON Lines.
    emit(result, args.json, getattr(args, "render", None), out=sys.stderr)
    return None


def _is_stdout(file: str) -> bool:
    """Whether ``file`` is where standard output goes (/dev/stdout, /dev/fd/1, the file it is redirected to)."""
    try:
        there, out = os.stat(os.path.expanduser(file)), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # no such file, or stdout replaced in-process
        return False
    return (there.st_dev, there.st_ino) == (out.st_dev, out.st_ino)


class _Terminated(BaseException):
    """SIGTERM during an export: unwinds it so its temporary file is removed, then ends the process
    by SIGTERM as it would have ended."""


@contextmanager
def _stopped_by_sigterm() -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (an embedding program): left as it is
        yield
        return
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise SystemExit(128 + signal.SIGTERM) from None  # where a SIGTERM does not end the process (Windows)
    finally:
        signal.signal(signal.SIGTERM, previous)


def cmd_import(args: argparse.Namespace) -> Any:
    with open_memory(args) as mem:
        if args.file != STDIO:
            return mem.import_(args.file, allow_incomplete=args.allow_incomplete)
        stream = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
        try:
            return mem.import_(stream, allow_incomplete=args.allow_incomplete)
        finally:
            stream.detach()


def cmd_reindex(args: argparse.Namespace) -> Any:
    with open_existing(args, embedder="auto") as mem:
        return mem.reindex(everything=args.all, replace_other_models=args.replace_other_models,
                           progress=progress_bar("reindex", not args.no_progress))


def render_reindex(result: dict[str, Any]) -> Iterator[str]:
    yield f"embedded {result['reembedded']} of {result['total']} memories with {result['model_id']}"
    for model_id, count in result.get("kept_other_models", {}).items():
        yield (f"kept {count:,} vectors of {model_id} (recall compares only {result['model_id']} vectors; "
               f"--replace-other-models re-embeds them)")
    for index in result.get("vector_indexes", []):
        yield f"vector index of {index['collection']}: {index['rows']:,} vectors in {index['seconds']:.1f} s"


def cmd_demo(args: argparse.Namespace) -> Any:
    from .demo import run_demo

    # --json: the result is the whole answer; the narration would be chatter on stderr, so it goes nowhere.
    with open_memory(args) as mem:
        result = run_demo(mem, io.StringIO() if args.json else sys.stdout)
    return result if args.json else None  # people already read the narration


def _generic(value: Any) -> Iterator[str]:
    if isinstance(value, dict) and "content" in value and "id" in value:
        yield f"#{value['id']} [{value.get('perception_type') or value.get('type')}] {value['content']}"
        rest = {k: v for k, v in value.items() if k not in ("id", "content")}
        yield from human_lines(rest)
        return
    yield from human_lines(value)


def _command(sub: Any, name: str, func: Any, help: str, render: Any = _generic) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
    parser.set_defaults(func=func, render=render)
    return parser


def _add_recall(sub: Any) -> None:
    p = _command(sub, "recall", cmd_recall, "Recall the most relevant memories.", render_recall)
    p.add_argument("query", nargs="?", default="", help="what to look for (empty: filters and --near only)")
    p.add_argument("--filter", metavar="JSON", help='context filter, e.g. \'{"task.success": true}\'')
    add_near_options(p, "nearest first: FIELD X Y [Z]")
    p.add_argument("-n", type=int, default=5, help="how many results (default 5)")
    p.add_argument("--min-confidence", type=float, default=0.3, metavar="C",
                   help="skip memories whose decayed confidence is below C (default 0.3)")
    p.add_argument("--min-relevance", type=float, default=None, metavar="R",
                   help=f"leave out hits less relevant than R, 0-1 (default {DEFAULT_MIN_RELEVANCE}); "
                   "0 shows every candidate")
    p.add_argument("--session", metavar="ID", help="only memories of this episode")
    p.add_argument("--since", metavar="TIME", help="only memories from this time on (ISO 8601 or Unix seconds)")
    p.add_argument("--until", metavar="TIME", help="only memories up to this time (ISO 8601 or Unix seconds)")


def _add_writes(sub: Any) -> None:
    p = _command(sub, "learn", cmd_learn, "Store an insight.")
    p.add_argument("insight", help="the insight, in words")
    p.add_argument("--context", metavar="JSON", help="context: params, spatial, robot, task")
    p.add_argument("--session", metavar="ID", help="the episode it belongs to")
    p = _command(sub, "forget", cmd_forget, "Retract a memory (soft delete).")
    p.add_argument("memory_id", type=int, help="the memory's id")
    p.add_argument("--reason", required=True, help="why it is retracted (kept with the memory)")
    p = _command(sub, "update", cmd_update, "Correct a memory.")
    p.add_argument("memory_id", type=int, help="the memory's id")
    p.add_argument("new_content", help="the corrected text")
    p.add_argument("--context", metavar="JSON", help="replacement context")


def register(sub: Any) -> None:
    _add_recall(sub)
    _add_writes(sub)
    memory = sub.add_parser("memory", help="Read single memories; purge old perceptions.",
                            description="Read single memories; purge old perceptions.")
    memory.set_defaults(func=lambda _args: memory.print_help(sys.stderr) or 2)  # a usage error: stderr
    verbs = memory.add_subparsers(dest="verb", metavar="VERB")
    p = _command(verbs, "get", cmd_get, "Show one memory (any status).")
    p.add_argument("memory_id", type=int, help="the memory's id")
    p.add_argument("--data", action="store_true", help="print the full perception payload instead")
    p = _command(verbs, "purge", cmd_purge,
                 "Delete for good the perceptions that occurred before a time (every collection, or "
                 "--collection's, or --session's); facts, episode summaries and sessions stay.")
    p.add_argument("--before", required=True, metavar="TIME",
                   help="delete perceptions that occurred before this time (ISO 8601 or Unix seconds)")
    p.add_argument("--session", metavar="ID", help="only this episode's perceptions")
    p.add_argument("--dry-run", action="store_true", help="only count what would be deleted")
    p.add_argument("--yes", action="store_true", help="delete without asking (required to delete)")
    _command(sub, "stats", cmd_stats, "Show counts, the embedding model and file sizes.", render_stats)
    p = _command(sub, "export", cmd_export, "Export everything as JSON Lines.")
    p.add_argument("file", help="the JSON Lines file to write, replaced only once the export is whole; "
                                "- for standard output (the summary then goes to stderr)")
    p = _command(sub, "import", cmd_import, "Import a JSON Lines export (idempotent).")
    p.add_argument("file", help="a file written by `robotmem export`; - for standard input")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="import the records of a file cut short (no end record, or fewer lines than it "
                        "counts) instead of refusing it")
    p = _command(sub, "reindex", cmd_reindex,
                 "Embed memories that have no vector, and write the vector index of large collections.",
                 render_reindex)
    p.add_argument("--all", action="store_true",
                   help="also re-embed memories that have a vector of the active model (its file changed)")
    p.add_argument("--replace-other-models", action="store_true",
                   help="also re-embed memories whose vector is from another model (after switching models); "
                        "without it they are kept")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _command(sub, "demo", cmd_demo, "Write a short demo episode into the store and recall from it.")

