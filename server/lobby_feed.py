"""The lobby feed: changes to the seeks and listed games, coalesced and sent to the
lobby's subscribers once a tick.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterable
from typing import Any

from protocol import LobbyEvent, LobbyState, LobbyUpdate, encode
from server.hub import Hub
from server.lobby import Changes, SeekEntry, Subscription, Window, game_rank, top_games
from server.session import GameSession


class LobbyFeed(Hub):
    """The lobby's subscribers and what they are sent."""

    # --- the lobby -----------------------------------------------------------------------

    def _lobby_push(
        self,
        event: LobbyEvent,
        *,
        seek: SeekEntry | None = None,
        private: GameSession | None = None,
    ) -> None:
        """A change to the lobby (``event`` says which kind; the seeks are already in
        ``self.lobby``): subscribers hear of it at the next tick, coalesced with the rest."""
        if private is not None and private.private:
            return
        if event.kind in ("game_added", "game_removed"):
            self._lobby_games_changed = True
            if self.cluster is not None and private is not None:  # a game of this node's
                self.cluster.game_listed(private, event.kind == "game_added")
        if self._lobby_timer is not None:
            return
        if not self.lobby_connections and not self.lobby.windows:
            self.lobby.take_journal()  # nobody to tell
            return
        loop = asyncio.get_running_loop()
        self._lobby_timer = loop.call_later(self.settings.lobby_tick_s, self._lobby_flush)

    def _remove_seek(self, seek: SeekEntry) -> None:
        if self.lobby.remove(seek.id) is None:
            return
        if self.cluster is not None and seek.owner_connection.node is None:  # posted here
            if seek.quick:
                self.cluster.quick_removed(seek)  # out of the cluster's queue
            else:
                self.cluster.seek_removed(seek.id, posted_here=True)  # from every lobby
        handle = self._quick_timers.pop(seek.id, None)
        if handle is not None:
            handle.cancel()
        if not seek.quick:
            self._lobby_push(LobbyEvent(kind="seek_removed", seek_id=seek.id), seek=seek)

    def _listed_games(self, count: int) -> tuple[list[str], int]:
        """The ids of the ``count`` most relevant games the lobby lists, and how many it
        lists in all (live and not private; in a cluster, on every node)."""
        listed = [g for g in self.games.values() if g.status == "live" and not g.private]
        remote = self.cluster.listed if self.cluster is not None else {}
        if not remote:
            return [g.id for g in top_games(listed, count)], len(listed)
        ranked = [(game_rank(g), g.id) for g in listed]
        ranked += [(rank, g) for g, (rank, _) in remote.items() if g not in self.games]
        return [g for _, g in heapq.nsmallest(count, ranked)], len(ranked)

    def _summaries(self, game_ids: Iterable[str]) -> list[dict[str, Any]]:
        remote = self.cluster.listed if self.cluster is not None else {}
        summaries = []
        for game_id in game_ids:
            session = self.games.get(game_id)
            if session is not None:
                summaries.append(session.summary())
            elif game_id in remote:
                summaries.append(remote[game_id][1])  # as its owner announced it
        return summaries

    def _lobby_window(self, limit: int) -> Window:
        games, total = self._listed_games(limit)
        return self.lobby.window(limit, games, total)

    def _lobby_state(
        self, player_id: str | None, rid: int, subscription: Subscription, window: Window
    ) -> LobbyState:
        """A subscriber's first page: the challenges that concern it, then the window."""
        limit = subscription.limit
        challenges = self.lobby.challenges_of(player_id, limit)
        seeks = [s.to_dict() for s in challenges] + [s.to_dict() for s in window.seeks.values()]
        games = self._summaries(window.games)
        if not subscription.paged:
            return LobbyState(rid=rid, seeks=seeks, games=games)
        return LobbyState(
            rid=rid,
            seeks=seeks,
            games=games,
            page=1,
            limit=limit,
            seeks_total=window.seeks_total,
            games_total=window.games_total,
        )

    def _lobby_flush(self) -> None:
        """The tick: send each subscriber what changed on its first page since the last one
        (coalesced: a seek posted and withdrawn meanwhile costs nothing), at most one
        ``lobby_update``, or ``lobby_events_per_tick`` events, a subscriber."""
        self._lobby_timer = None
        journal = self.lobby.take_journal()
        games_changed, self._lobby_games_changed = self._lobby_games_changed, False
        subscribers = self.lobby_connections
        limits = {s.limit for s in subscribers.values()}
        old = {limit: w for limit, w in self.lobby.windows.items() if limit in limits}
        self.lobby.windows = {}
        if not limits:
            return
        ranked: tuple[list[str], int] | None = None
        if games_changed or len(old) < len(limits):
            ranked = self._listed_games(max(limits))
        updates: dict[int, tuple[Window, Changes]] = {}
        for limit in limits:
            previous = old.get(limit)
            if ranked is not None:
                window = self.lobby.window(limit, *ranked)
            else:
                assert previous is not None
                window = self.lobby.window(limit, previous.games, previous.games_total)
            self.lobby.windows[limit] = window
            updates[limit] = (window, Changes.between(previous or window, window))
        frames: dict[tuple[int, bool], list[bytes]] = {}  # shared by every subscriber alike
        for connection, subscription in list(subscribers.items()):
            window, changes = updates[subscription.limit]
            own = subscription.window is not None
            if subscription.window is not None:  # subscribed since the last tick
                changes = Changes.between(subscription.window, window)
                subscription.window = None
            mine = journal.get(connection.player_id or "", {})
            if not changes and not mine and not (subscription.paged and changes.totals):
                continue
            if len(mine) > subscription.limit or (
                not subscription.paged
                and len(changes) + len(mine) > self.settings.lobby_events_per_tick
            ):
                state = self._lobby_state(
                    connection.player_id, subscription.rid, subscription, window
                )
                connection.post(encode(state))
                continue
            key = (subscription.limit, subscription.paged)
            if not mine and not own and key in frames:
                shared = frames[key]
            else:
                shared = self._lobby_frames(subscription.paged, window, changes, mine)
                if not mine and not own:
                    frames[key] = shared
            for frame in shared:
                connection.post(frame)

    def _lobby_frames(
        self,
        paged: bool,
        window: Window,
        changes: Changes,
        challenges: dict[str, SeekEntry | None],
    ) -> list[bytes]:
        """One tick's changes as frames: one ``lobby_update`` for a subscription that asked
        for pages, else one ``lobby_event`` per change."""
        added = [s.to_dict() for s in changes.seeks]
        added += [s.to_dict() for s in challenges.values() if s is not None]
        removed = changes.seeks_removed + [i for i, s in challenges.items() if s is None]
        games = self._summaries(changes.games)
        if paged:
            update = LobbyUpdate(
                seeks=added,
                seeks_removed=removed,
                games=games,
                games_removed=changes.games_removed,
                seeks_total=window.seeks_total,
                games_total=window.games_total,
            )
            return [encode(update)]
        events = [LobbyEvent(kind="seek_removed", seek_id=i) for i in removed]
        events += [LobbyEvent(kind="seek_added", seek=s) for s in added]
        events += [LobbyEvent(kind="game_removed", game_id=g) for g in changes.games_removed]
        events += [LobbyEvent(kind="game_added", game=g) for g in games]
        return [encode(e) for e in events]
