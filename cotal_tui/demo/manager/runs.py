"""The run family (D1's region): ``run-start`` ``run-resume`` ``run-answer`` ``run-status``
``run-ps``, delegated to the run host of :mod:`cotal_tui.demo.runs`."""

from __future__ import annotations

from typing import Any

from cotal_tui.demo.runs import RunHost
from meshview.wire.endpoint import MANAGER, ParsedRequest

from cotal_tui.demo.manager.base import ManagerBase, fail


class RunFamily(ManagerBase):
    async def _start_runs(self, *, boot_run: str | None = None) -> None:
        mesh = self._run_mesh or ("user" if self.user_mesh else
                                  ("static" if self.session_connect is not None else "open"))
        self.run_host = RunHost(self.nc, self.space, endpoint=MANAGER, instance_id=self.instance_id, mesh=mesh)
        await self.run_host.start()
        if boot_run is not None and self.run_host.hosts_runs:
            await self.run_host.start_bundled(boot_run)

    async def _run_command(self, parsed: ParsedRequest, args: dict[str, Any]) -> object:
        if self.run_host is None:
            raise fail("unavailable", "the manager is still starting its run host; retry shortly")
        return await self.run_host.handle(parsed.command, parsed.caller, args, generation=parsed.generation)

    async def _cmd_run_start(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> object:
        return await self._run_command(parsed, args)

    async def _cmd_run_resume(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> object:
        return await self._run_command(parsed, args)

    async def _cmd_run_answer(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> object:
        return await self._run_command(parsed, args)

    async def _cmd_run_status(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> object:
        return await self._run_command(parsed, args)

    async def _cmd_run_ps(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> object:
        return await self._run_command(parsed, args)
