"""Spawn goals: the first fact about a spawned seat (joined, exited first, or the readiness
deadline passed) settles its goal on the caller's epe progress rail, and ``goal-result`` re-reads
the caller's own settled goal."""

from __future__ import annotations

import json
from typing import Any

from meshview.errors import swallowed
from meshview.wire.endpoint import MANAGER, ParsedRequest, goal_progress_subject

from cotal_tui.demo.manager.base import ManagerBase
from cotal_tui.demo.manager.spec import Goal, Seat

GOALS_KEPT = 256


class GoalFamily(ManagerBase):
    async def _progress(self, goal: Goal, body: dict[str, Any]) -> None:
        c = goal.caller
        subj = goal_progress_subject(self.space, MANAGER, self.instance_id, self.epoch, c, goal.goal_id)
        try:
            await self.nc.publish(subj, json.dumps({"v": 1, "goalId": goal.goal_id, **body},
                                                   separators=(",", ":")).encode())
        except Exception:  # noqa: BLE001 - progress is advisory; the goal's reply carries the outcome [counted: COTAL_LOG]
            swallowed("demo.manager.goal-progress")

    def _settle(self, seat: Seat, state: str, data: dict[str, Any] | None = None) -> None:
        """First fact wins: the goal's terminal fact, published on the caller's progress rail and
        kept (for that caller only) for ``goal-result``."""
        goal = seat.goal
        if goal is None or goal.settled:
            return
        goal.settled = True
        if goal.timer is not None:
            goal.timer.cancel()
        body: dict[str, Any] = {"phase": "terminal", "state": state}
        if data is not None:
            body["data"] = data
        self._goals[goal.goal_id] = (goal.caller.principal, {"v": 1, "goalId": goal.goal_id, **body})
        while len(self._goals) > GOALS_KEPT:
            self._goals.pop(next(iter(self._goals)))
        self._later(self._progress(goal, body))

    async def _cmd_goal_result(self, parsed: ParsedRequest, env: dict[str, Any],
                               args: dict[str, Any]) -> dict[str, Any]:
        """The caller's own settled goal (by principal, so it stays readable from a replaced
        connection); anyone else's goal, or one not settled, answers with no ``result``."""
        gid = args["goalId"]
        out: dict[str, Any] = {"goalId": gid}
        kept = self._goals.get(gid)
        if kept is not None and kept[0] == parsed.caller.principal:
            out["result"] = kept[1]
        return out
