"""What the manager can launch: its personas seeded as files, and the persona and model commands
(``list-personas``, ``show-persona``, ``define-persona``, ``models``)."""

from __future__ import annotations

from typing import Any

from cotal_tui.demo.personas import PersonaError
from meshview.wire.endpoint import ParsedRequest

from cotal_tui.demo.manager.base import ManagerBase, fail


class CatalogFamily(ManagerBase):
    def _seed_personas(self) -> None:
        """The configured personas become files of the catalogue (an existing file is the
        operator's and is kept)."""
        for name, p in self.personas.items():
            if not self.persona_store.path_for(name).exists():
                self.persona_store.write(p.as_file(name, self.persona_store))

    async def _cmd_models(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        agent = args.get("agent")
        if agent is not None and agent not in self.connectors:
            raise fail("failed-precondition", f"no connector named {agent!r} (this manager has "
                       f"{', '.join(self.connectors)})")
        names = [agent] if agent is not None else list(self.connectors)
        # the demo's programs take no model: every catalog is unsupported and empty
        return {"catalogs": [{"agent": n, "supported": False, "models": []} for n in names]}

    async def _cmd_list_personas(self, parsed: ParsedRequest, env: dict[str, Any],
                                 args: dict[str, Any]) -> dict[str, Any]:
        return {"personas": self.persona_store.catalog()}

    async def _cmd_show_persona(self, parsed: ParsedRequest, env: dict[str, Any],
                                args: dict[str, Any]) -> dict[str, Any]:
        name = str(args["name"]).strip()
        try:
            p = self.persona_store.load(name)
        except PersonaError as e:
            return {"name": name, "error": str(e)}
        if p is None:
            raise fail("not-found", f"no persona named {name!r} (this manager knows "
                       f"{', '.join(self.persona_store.names()) or 'none'})")
        return p.show()

    async def _cmd_define_persona(self, parsed: ParsedRequest, env: dict[str, Any],
                                  args: dict[str, Any]) -> dict[str, Any]:
        try:
            p = self.persona_store.define(args, parsed.caller.principal)
        except PersonaError as e:
            raise fail("failed-precondition", str(e)) from None
        return {"name": p.name, "path": str(p.path)}
