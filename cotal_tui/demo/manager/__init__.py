"""The demo manager: a faithful stand-in of the reference manager (service contract revision 21)
on an open or static mesh, serving real pty seats.

It registers as the reference does: presence as an endpoint with role ``manager``, a liveness
lease, ``svc.manager.<iid>.spec`` and ``.status`` (state ``ready``, then ``exited`` on a stop) in
the records bucket, every contract artifact in ``EPC_<space>``; a clean stop deregisters (status
deleted, then spec, each revision-pinned). The contract is the reference's own, shipped as data
(:mod:`cotal_tui.demo.contract`): every request's args are validated against the command's closed
input schema (``bad-request``, the reference's wording) and every reply against its output schema
before it leaves (a miss is ``internal`` and is recorded, loud under tests).

Served: ``status`` ``ps`` ``inspect`` ``slots`` ``models`` ``spawn`` ``despawn`` ``attach`` ``input``
``goal-result`` ``list-personas`` ``show-persona`` ``define-persona`` ``purge`` and the run family;
every other contract command answers ``unimplemented`` naming it. On an open mesh nothing is
minted per session and the sessions share the manager's connection.

One module per command family, each a class the :class:`DemoManager` is assembled from:

- ``base``      the state every family shares, declared once
- ``spec``      what a seat is: personas, seat spec, live seat, spawn goal (data)
- ``registry``  epoch, ``svc`` records, lease, the manager's presence
- ``dispatch``  the request boundary (contract, bind fence, schemas) and handler lookup
- ``issued``    the ep.v1 issued-generation check (§13.15)
- ``authz``     target resolution and the user-auth mesh's ledger scopes
- ``seats``     pty seats: start, output, exit, presence, despawn, input
- ``goals``     spawn goals settled on the caller's progress rail; ``goal-result``
- ``spawn``     ``spawn``: persona, connector, name, launch
- ``rows``      ``ps``, ``inspect``, ``slots``: the AgentRow
- ``sessions``  ``attach``: grant, session ledger, serving rail and bridge
- ``catalog``   personas and models: seeding and the persona/model commands
- ``runs``      the run family, delegated to :mod:`cotal_tui.demo.runs`
- ``purge``     ``purge`` of the space's retained chat and DMs
- ``service``   :class:`DemoManager`: start, stop, heartbeat, ``status``
"""

from cotal_tui.demo.manager.service import DemoManager
from cotal_tui.demo.manager.spec import SeatSpec

__all__ = ["DemoManager", "SeatSpec"]
