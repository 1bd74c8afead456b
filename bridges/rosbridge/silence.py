"""Topics the server lists as published that deliver nothing to us.

The real rosbridge server sends no error when it refuses a subscription (a message type
it cannot load, for one): the topic is listed by rosapi, our subscription looks fine, and
nothing ever arrives. A topic that rosapi lists, that we subscribed to, and that has
delivered nothing for ``after_s`` seconds (counted again after every reconnect) is named
once, so the user can look at the server.

rosapi's topic list also holds topics that only have subscribers (``/rosapi/topics`` is
the master's publishers and subscribers together), among them every topic the bridge
subscribed to on spec: such a topic is silent because nobody publishes it, which is no
news. So a silent topic is named only when a node publishes it (``published``: rosapi's
``/rosapi/publishers``), and its clock starts when a publisher is first seen: counted from the
subscription, a node that started publishing seconds later was named before its first message
could arrive. One without publishers is asked about again later.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SilentTopicWatch"]


class SilentTopicWatch:
    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self._since: dict[str, float] = {}
        self._warned: set[str] = set()

    def restart(self) -> None:
        """A (re)connect: subscriptions are new, their clocks start again."""
        self._since.clear()

    def check(self, listed: dict[str, str], subscribed: dict[str, str], received: dict[str, int],
              now: float, published: Callable[[str], bool]) -> list[tuple[str, str]]:
        """(topic, type) of the published topics silent for ``after_s`` that were not named before.

        ``published(topic)``: whether some node publishes it (True when that cannot be told)."""
        silent = []
        for topic, msgtype in sorted(subscribed.items()):
            if topic not in listed or received.get(topic, 0) > 0:
                self._since.pop(topic, None)
                continue
            if topic in self._warned or not published(topic):
                self._since.pop(topic, None)
                continue
            since = self._since.setdefault(topic, now)
            if now - since >= self.after_s:
                self._warned.add(topic)
                silent.append((topic, msgtype))
        return silent
