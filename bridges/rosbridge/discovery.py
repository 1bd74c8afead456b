"""Which topics to subscribe to, from the config rules and what the server says it has.

* With rosapi (``/rosapi/topics``): every listed topic that a rule matches (by name, or by
  type for ``topic = "*"`` rules) is subscribed with the type the server reports; topics
  the config names explicitly but the server does not list yet are subscribed too (a
  node may start publishing later), and reported as "not seen yet".
* Without rosapi: only the topics the config names explicitly, with their configured
  types, written ``pkg/Type`` — the form both ROS 1 and ROS 2 rosbridge accept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bridges.pipeline.config import BridgeConfig, TopicRule
from bridges.pipeline.messages import normalize_msgtype

__all__ = ["DiscoveryReport", "PlannedSubscription", "plan_subscriptions", "wire_type"]


@dataclass(frozen=True)
class PlannedSubscription:
    topic: str
    #: the type to send in ``subscribe``, spelled as the server does
    wire_type: str
    throttle_rate_ms: int
    queue_length: int
    converter: str
    #: True when the server listed the topic (rosapi); False when subscribed on spec
    seen: bool


@dataclass
class DiscoveryReport:
    rosapi: bool
    subscriptions: list[PlannedSubscription] = field(default_factory=list)
    #: topics the server lists that no rule matches (not subscribed)
    ignored: list[str] = field(default_factory=list)
    #: topics the config names whose server type differs (not subscribed)
    type_mismatch: dict[str, str] = field(default_factory=dict)
    #: topics the config names without a msgtype that the server does not list (type unknown)
    untyped: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if not self.subscriptions:
            return "no topics to subscribe"
        parts = [f"{s.topic} [{s.wire_type}] -> {s.converter}" + ("" if s.seen else " (not seen yet)")
                 for s in self.subscriptions]
        source = "rosapi" if self.rosapi else "config (rosapi unavailable)"
        text = f"topics from {source}: " + "; ".join(parts)
        if self.type_mismatch:
            text += "; skipped (other type): " + ", ".join(f"{t} is {ty}" for t, ty in self.type_mismatch.items())
        if self.untyped:
            text += "; waiting for a type (not listed, no msgtype in config): " + ", ".join(self.untyped)
        return text


def wire_type(msgtype: str, ros2_style: bool) -> str:
    """``pkg/msg/Type`` for a ROS 2 server, ``pkg/Type`` otherwise (ROS 2 rosbridge accepts both)."""
    pkg, _, name = normalize_msgtype(msgtype).partition("/msg/")
    return f"{pkg}/msg/{name}" if ros2_style else f"{pkg}/{name}"


def plan_subscriptions(config: BridgeConfig, available: dict[str, str] | None) -> DiscoveryReport:
    """The subscriptions for ``config`` given the server's topic -> type map (None: no rosapi)."""
    report = DiscoveryReport(rosapi=available is not None)
    ros2_style = available is not None and any("/msg/" in t for t in available.values())
    planned: dict[str, PlannedSubscription] = {}
    for topic, server_type in sorted((available or {}).items()):
        try:
            msgtype = normalize_msgtype(server_type)
        except ValueError:
            report.ignored.append(topic)
            continue
        rules = config.rules_for(topic, msgtype)
        if rules:
            planned[topic] = _planned(topic, server_type, rules, seen=True)
        elif any(r.topic == topic for r in config.explicit_topics()):
            report.type_mismatch[topic] = server_type
        else:
            report.ignored.append(topic)
    for rule in config.explicit_topics():
        if rule.topic in planned or rule.topic in report.type_mismatch:
            continue
        if rule.msgtype is None:
            report.untyped.append(rule.topic)
            continue
        rules = tuple(r for r in config.explicit_topics() if r.topic == rule.topic)
        planned[rule.topic] = _planned(rule.topic, wire_type(rule.msgtype, ros2_style), rules, seen=False)
    report.subscriptions = list(planned.values())
    return report


def _planned(topic: str, wire: str, rules: tuple[TopicRule, ...], *, seen: bool) -> PlannedSubscription:
    # Several rules on one topic share one subscription: the least throttled one wins.
    throttle = min(r.throttle_rate_ms for r in rules)
    queue = max(r.queue_length for r in rules)
    return PlannedSubscription(topic, wire, throttle, queue, "+".join(sorted({r.converter for r in rules})), seen)
