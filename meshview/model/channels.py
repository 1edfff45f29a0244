"""The channel list: a component the model holds (:class:`Channels`), owning its state and its
``state()`` / ``from_state()``, as the roster and the feed ring do.

The registry is kept as wire records and read through the ``meshview.wire`` rules (replay,
delivery class, window); beside it, the broker's retained counts (polled) and what the tap
heard of each channel (arrivals, newest ``ts``). The snapshot's channel list is kept between
snapshots: only the channels a message or a poll changed are rebuilt (10k channels cost 35 ms
a snapshot rebuilt whole).

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

from bisect import insort
from typing import Iterable, Mapping

from meshview.model.snapshot import ChannelInfo, ChannelSettings
from meshview.model.state import ChannelsState
from meshview.wire import (
    ChannelConfig,
    ChannelDefaults,
    effective_class,
    effective_replay,
    effective_window,
    replay_floor,
)

#: Channels heard on the tap kept (arrival counts, last message): past it the first heard of
#: goes. Registered channels always stay; 10k channels cost a snapshot 0.3 ms.
CHANNELS_CAP = 20_000


class Channels:
    """The registry, the polled counts and the tap's, and the channel list built from them.
    The model registers the inputs; these reducers count no change of their own (the model
    does, after each)."""

    def __init__(self, st: ChannelsState | None = None) -> None:
        st = st or ChannelsState()
        self._registry: dict[str, ChannelConfig] = dict(st.registry)
        self._defaults: ChannelDefaults | None = st.defaults
        self._retained: dict[str, int] = dict(st.retained)
        self._arrivals: dict[str, int] = dict(st.arrivals)
        self._arrivals_at_poll: dict[str, int] = dict(st.arrivals_at_poll)  # when ``_retained`` was read
        self._last: dict[str, float] = dict(st.last)
        # the list as last built, by name; ``_info`` None: rebuild all of it
        self._info: dict[str, ChannelInfo] | None = None
        self._names: list[str] = []  # sorted
        self._dirty: set[str] = set()
        self._tuple: tuple[ChannelInfo, ...] = ()

    def state(self) -> ChannelsState:
        """The channels as a checkpoint holds them (containers copied)."""
        return ChannelsState(dict(self._registry), self._defaults, dict(self._retained),
                             dict(self._arrivals), dict(self._arrivals_at_poll), dict(self._last))

    @classmethod
    def from_state(cls, st: ChannelsState) -> Channels:
        """Channels put back; the list is rebuilt at the next snapshot."""
        return cls(st)

    def heard(self, channel: str, ts: float, historical: bool) -> None:
        """A message on ``channel`` (not an event channel's): a live one counts as an arrival
        (a channel first heard of joins the list); either moves its newest ``ts``. Per message."""
        if not historical:
            arrivals = self._arrivals
            if channel not in self._retained and channel not in self._registry:
                self._retained[channel] = 0  # a new channel: its arrivals count
                self._arrivals_at_poll[channel] = arrivals.get(channel, 0)
                if len(arrivals) >= CHANNELS_CAP:
                    self._forget_first(channel)
            arrivals[channel] = arrivals.get(channel, 0) + 1
        last = self._last.get(channel)
        if last is None or ts > last:
            self._last[channel] = ts
        self._dirty.add(channel)

    def set_registry(self, configs: Mapping[str, ChannelConfig | ChannelSettings],
                     defaults: ChannelDefaults | ChannelSettings | None) -> None:
        """Replace the registry (``defaults`` None keeps the defaults already known)."""
        self._registry = {k: v.config() if isinstance(v, ChannelSettings) else v
                          for k, v in configs.items()}
        if defaults is not None:
            self._defaults = defaults.defaults() if isinstance(defaults, ChannelSettings) else defaults
        self._info = None

    def set_retained(self, counts: Mapping[str, int]) -> None:
        """Per-channel stored counts from a poll: rebuilt whole, so deleted channels go."""
        old_r, old_p = self._retained, self._arrivals_at_poll
        self._retained = new_r = dict(counts)
        self._arrivals_at_poll = new_p = dict(self._arrivals)
        if self._info is not None:
            if new_r.keys() != old_r.keys():
                self._info = None  # channels came or went: the list is rebuilt
            else:
                self._dirty.update(ch for ch in new_r if new_r[ch] != old_r[ch]
                                   or new_p.get(ch) != old_p.get(ch))

    def forget(self, names: Iterable[str]) -> None:
        """Channels whose history was deleted leave the list until heard again."""
        for ch in names:
            for d in (self._retained, self._arrivals, self._arrivals_at_poll, self._last):
                d.pop(ch, None)
        self._info = None

    def effective(self, channel: str) -> ChannelSettings:
        """A channel's settings by the wire rules (channel ?? defaults ?? SPEC default)."""
        c, d = self._registry.get(channel), self._defaults
        return ChannelSettings(
            replay=effective_replay(c, d), replay_window=effective_window(c, d),
            delivery_class=effective_class(c, d),
            description=c.description if c else None,
            instructions=c.instructions if c else None,
        )

    def replay_floor(self, channel: str, now: float) -> float | None:
        """Oldest ``ts`` a backfill of ``channel`` may show at ``now`` (None = no floor)."""
        return replay_floor(self._registry.get(channel), self._defaults, now)

    def _total_of(self, ch: str) -> int | None:
        """The broker's count as of its last poll plus what arrived live since: the poll is
        2 s old at worst, so a busy channel's total never lags behind its unread badge."""
        n = self._retained.get(ch)
        if n is None:
            return None
        return n + max(0, self._arrivals.get(ch, 0) - self._arrivals_at_poll.get(ch, 0))

    def _forget_first(self, keep: str) -> None:
        """Past :data:`CHANNELS_CAP` channels heard: the first heard of that the registry does not
        list goes (any peer may post to any number of channels)."""
        for ch in self._arrivals:
            if ch != keep and ch not in self._registry:
                for d in (self._retained, self._arrivals, self._arrivals_at_poll, self._last):
                    d.pop(ch, None)
                self._info = None
                return

    def infos(self) -> tuple[ChannelInfo, ...]:
        """The channel list by name, rebuilt only where a message or a poll changed it."""
        infos, dirty = self._info, self._dirty
        if infos is None:
            names = sorted(set(self._retained) | set(self._registry) | set(self._arrivals))
            infos = self._info = {ch: self._channel_info(ch) for ch in names}
            self._names = names
        elif dirty:
            for ch in dirty:
                if ch not in infos:
                    insort(self._names, ch)
                infos[ch] = self._channel_info(ch)
        else:
            return self._tuple
        dirty.clear()
        self._tuple = tuple(map(infos.__getitem__, self._names))
        return self._tuple

    def _channel_info(self, ch: str) -> ChannelInfo:
        c, d = self._registry.get(ch), self._defaults
        return ChannelInfo(
            name=ch, retained=self._total_of(ch), arrivals=self._arrivals.get(ch, 0),
            registered=c is not None, replay=effective_replay(c, d),
            delivery_class=effective_class(c, d), replay_window=effective_window(c, d),
            description=c.description if c else None,
            instructions=c.instructions if c else None,
            last_ts=self._last.get(ch),
        )
