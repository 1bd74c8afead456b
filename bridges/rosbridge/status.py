"""Bridge counters as one snapshot, the periodic status line and the exit summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BridgeSnapshot", "format_status", "format_summary"]


@dataclass
class BridgeSnapshot:
    """Everything the bridge counts, at one moment (JSON-ready through :meth:`as_dict`)."""

    url: str = ""
    connected: bool = False
    connects: int = 0
    disconnects: int = 0
    #: per topic: accepted into the inbox / fed to the pipeline / refused because the inbox was full
    received: dict[str, int] = field(default_factory=dict)
    fed: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    #: per topic: rejected by the bridge or by the pipeline's converters
    malformed: dict[str, int] = field(default_factory=dict)
    #: per topic: records and notes robotmem refused (a note too long, a bad context, ...)
    rejected: dict[str, int] = field(default_factory=dict)
    #: per topic: stamped before an ended episode's end, arrived after it, stored in it (late_grace_s)
    late: dict[str, int] = field(default_factory=dict)
    #: per topic: data and notes that came while no episode was open (notes are stored without one)
    outside_episode: dict[str, int] = field(default_factory=dict)
    #: frames roslibpy could not even parse or route
    bad_frames: int = 0
    server_status: int = 0
    feed_errors: int = 0
    queue: int = 0
    queue_peak: int = 0
    queue_capacity: int = 0
    #: bytes the inbox holds (queued and being fed; approximate, bridges/pipeline/sizes.py), its peak and bound
    queue_bytes: int = 0
    queue_peak_bytes: int = 0
    queue_max_bytes: int = 0
    #: receive -> fed (seconds): latest, worst since the last status line, worst of the run
    lag_s: float = 0.0
    max_lag_s: float = 0.0
    worst_lag_s: float = 0.0
    records_written: int = 0
    facts_learned: int = 0
    episodes_started: int = 0
    episodes_ended: int = 0
    #: of the episodes started, those attached to a control loop's session
    episodes_attached: int = 0
    #: the store refused writes (busy, failing): retries, records held for retry, records given up
    write_retries: int = 0
    held_records: int = 0
    held_bytes: int = 0
    store_dropped: int = 0
    last_write_s: float = 0.0
    max_write_s: float = 0.0
    recall_answered: int = 0
    recall_dropped: int = 0
    subscribed: dict[str, str] = field(default_factory=dict)
    #: connection attempts that failed since the last success
    failed_attempts: int = 0
    #: gaps recorded in episodes (disconnections, quiet topics)
    gaps: int = 0
    #: times the robot's clock went back (a simulator reset): each split the episode (writer.py)
    clock_resets: int = 0

    def total(self, name: str) -> int:
        counts: dict[str, int] = getattr(self, name)
        return sum(counts.values())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def format_status(prev: BridgeSnapshot | None, cur: BridgeSnapshot, interval_s: float) -> str:
    """One line: connection, per-topic rates since ``prev``, drops, malformed, queue and lag."""
    state = "connected" if cur.connected else (
        f"DISCONNECTED (reconnecting, {cur.failed_attempts} attempts failed)" if cur.failed_attempts
        else "DISCONNECTED (reconnecting)")
    rates = []
    for topic in sorted(cur.received):
        before = prev.received.get(topic, 0) if prev is not None else 0
        rate = (cur.received[topic] - before) / interval_s if interval_s > 0 else 0.0
        rates.append(f"{topic} {rate:.1f}/s")
    return (
        f"bridge {state} | {', '.join(rates) or 'no messages yet'} | "
        f"drops {cur.total('dropped')} malformed {cur.total('malformed') + cur.bad_frames}"
        f"{_rejected(cur)} | "
        f"queue {cur.queue}/{cur.queue_capacity}{_queue_mb(cur.queue_bytes, cur.queue_max_bytes)} "
        f"lag {cur.max_lag_s * 1000:.0f} ms | "
        f"records {cur.records_written} episodes {cur.episodes_started} | write {cur.last_write_s * 1000:.0f} ms"
        + _store_trouble(cur)
    )


def _mb(nbytes: int) -> str:
    return f"{nbytes / 2**20:.0f}"


def _queue_mb(held: int, bound: int) -> str:
    """The inbox's bytes against its bound: which of the two bounds refused a drop shows here."""
    return f" {_mb(held)}/{_mb(bound)} MB" if bound else ""


def _rejected(snap: BridgeSnapshot) -> str:
    """Only when robotmem refused records: per topic."""
    if not snap.rejected:
        return ""
    return " rejected " + ", ".join(f"{topic} {count}" for topic, count in sorted(snap.rejected.items()))


def _store_trouble(snap: BridgeSnapshot) -> str:
    """Only when the store has refused writes: retries, records held, records given up."""
    if not (snap.write_retries or snap.held_records or snap.store_dropped):
        return ""
    return (f" | store retries {snap.write_retries} held {snap.held_records} ({_mb(snap.held_bytes)} MB) "
            f"dropped {snap.store_dropped}")


def format_summary(snap: BridgeSnapshot, elapsed_s: float) -> str:
    """The multi-line summary printed when the bridge stops."""
    received = snap.total("received")
    rate = received / elapsed_s if elapsed_s > 0 else 0.0
    lines = [
        (f"bridge summary: {elapsed_s:.1f} s, {received} messages received ({rate:.1f}/s), "
         f"{snap.total('fed')} ingested, {snap.total('dropped')} dropped, "
         f"{snap.total('malformed') + snap.bad_frames} malformed, {snap.total('rejected')} rejected by robotmem"),
        (f"  records written {snap.records_written}, facts learned {snap.facts_learned}, "
         f"episodes {snap.episodes_started} started ({snap.episodes_attached} in control sessions) / "
         f"{snap.episodes_ended} ended"),
        (f"  connects {snap.connects}, disconnects {snap.disconnects}, peak queue {snap.queue_peak}/"
         f"{snap.queue_capacity}{_queue_mb(snap.queue_peak_bytes, snap.queue_max_bytes)}, worst lag {snap.worst_lag_s * 1000:.0f} ms, "
         f"worst write {snap.max_write_s * 1000:.0f} ms, "
         f"recall answered {snap.recall_answered}"),
        (f"  store write retries {snap.write_retries}, records held {snap.held_records}, "
         f"records given up {snap.store_dropped}, gaps recorded {snap.gaps}, clock resets {snap.clock_resets}"),
    ]
    for topic in sorted(set(snap.received) | set(snap.malformed) | set(snap.rejected)):
        lines.append(
            f"  {topic}: received {snap.received.get(topic, 0)}, ingested {snap.fed.get(topic, 0)}, "
            f"dropped {snap.dropped.get(topic, 0)}, malformed {snap.malformed.get(topic, 0)}, "
            f"rejected {snap.rejected.get(topic, 0)}"
            + "".join(f", {label} {counts[topic]}" for label, counts in
                      (("late", snap.late), ("outside episodes", snap.outside_episode)) if counts.get(topic))
        )
    return "\n".join(lines)
