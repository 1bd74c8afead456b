"""What replay prints: a progress bar while reading, a summary table, the dry-run plan."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from .replay import RecordingResult

__all__ = ["ProgressBar", "plan_lines", "summary_table"]


class ProgressBar:
    """``name [#####.....]  52%  1392/2774 msgs`` on one line of a terminal (redrawn at most 10x/s)."""

    def __init__(self, label: str, out: TextIO = sys.stderr, width: int = 30) -> None:
        self.label = label
        self.out = out
        self.width = width
        self._last = 0.0

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        finished = total is not None and done >= total
        if not finished and now - self._last < 0.1:
            return
        self._last = now
        if total:
            fraction = min(done / total, 1.0)
            bar = "#" * int(fraction * self.width)
            self.out.write(f"\r{self.label} [{bar:<{self.width}}] {fraction:4.0%}  {done}/{total} msgs")
        else:
            self.out.write(f"\r{self.label}  {done} msgs")
        if finished:
            self.out.write("\n")
        self.out.flush()


def summary_table(result: RecordingResult) -> list[str]:
    """Per topic: messages read and records written; then episodes and time."""
    stats = result.stats
    rate = stats.messages / result.seconds if result.seconds > 0 else 0.0
    state = "" if result.complete else ", INTERRUPTED before the end"
    lines = [f"{result.path}  ({result.seconds:.2f} s, {rate:,.0f} msgs/s{state})"]
    rows = [("topic", "type", "converter", "read", "records", "notes")]
    for name, topic in sorted(stats.topics.items()):
        if name == "(episode)":
            continue
        rows.append((name, topic.msgtype, topic.converter, str(topic.messages), str(topic.records), _notes(topic)))
    summaries = stats.topics.get("(episode)")
    if summaries is not None:
        rows.append(("(episode summaries)", "", "", "", str(summaries.records), ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  " + "  ".join(cell.rjust(w) if i in (3, 4) else cell.ljust(w)
                                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip())
    ignored = {t: i.count for t, i in sorted(result.file_topics.items()) if t not in result.selected}
    if ignored:
        lines.append("  not read (no rule; add one in bridge.toml or name it with --topics): "
                     + ", ".join(f"{t} ({c if c is not None else '?'})" for t, c in ignored.items()))
    if result.missing:
        lines.append("  asked for but not in the recording: " + ", ".join(result.missing))
    for name, info in sorted(result.undecodable.items()):
        lines.append(f"  not decoded: {name}: {info['messages']} message(s), first because: {info['reason']}")
    for name, counts in sorted(result.count_mismatch.items()):
        lines.append(f"  count mismatch: {name}: the recording lists {counts['listed']} message(s), "
                     f"{counts['read']} were read")
    lines.extend(_type_source_lines(result.type_sources))
    lines.append(
        f"  episodes: {stats.episodes_started - stats.episodes_rewritten} new, {stats.episodes_skipped} already stored, "
        f"{stats.episodes_rewritten} rewritten (left open by an interrupted run); records written: {stats.records_written}"
    )
    if stats.episodes_stored_by_other_options:
        lines.append(f"  {stats.episodes_stored_by_other_options} already stored by a replay of this recording with "
                     "other options (episode split, topics, config); to import it differently, use another collection")
    return lines


def _notes(topic: Any) -> str:
    parts = []
    for label, value in (("rejected", topic.rejected), ("malformed", topic.malformed),
                         ("stamps far from the log time (log time used)", topic.stamps_replaced),
                         ("sampled out", topic.sampled_out),
                         ("outside episodes", topic.outside_episode),
                         ("late (put into the episode they are stamped in)", topic.late),
                         ("already stored", topic.already_stored)):
        if value:
            parts.append(f"{value} {label}")
    return ", ".join(parts)


def _type_source_lines(sources: dict[str, list[str]]) -> list[str]:
    """Say where message definitions came from, when not (only) from the recording itself."""
    borrowed = {k: v for k, v in sources.items() if k != "recording"}
    if not borrowed:
        return []
    lines = [f"  message definitions: {source} for {', '.join(types)}" for source, types in borrowed.items()]
    if "recording" in sources:
        lines.append(f"  message definitions stored in the recording for {', '.join(sources['recording'])}")
    return lines


def plan_lines(result: RecordingResult) -> list[str]:
    """Dry run: the episodes and records that would be stored."""
    lines = [f"{result.path}: dry run, nothing written"]
    for step in result.plan:
        action = step["action"]
        if action == "start_episode":
            lines.append(f"  would start episode {step['session_id']} in collection {step['collection']}")
        elif action == "skip_episode":
            lines.append(f"  episode {step['session_id']} is already stored: nothing to do")
        elif action == "rewrite_open_episode":
            lines.append(f"  episode {step['session_id']} was left open by an interrupted run: would rewrite it")
        elif action == "perception":
            lines.append(f"    would store [{step['perception_type']}] {step['description']}")
        elif action == "learn":
            lines.append(f"    would learn: {step['insight']}")
        elif action == "skip_note":
            lines.append(f"    note already stored: {step['insight']}")
        elif action == "end_episode":
            score = f" (outcome score {step['outcome_score']})" if step.get("outcome_score") is not None else ""
            lines.append(f"  would end episode {step['session_id']}{score}")
    return lines
