"""Plane health: one verdict per component of a mesh, each with its SOURCE and its AGE, as the
reference's ``health.ts`` requires: an answer produced for THIS question is the only affirmative
evidence; a record written in the past (a lease, a registration) can only refuse or decorate; a
question nobody answered is never health.

Components: the broker (version, JetStream, message schedules ≥ 2.12), each registered manager
instance (``serving`` — it answered a pinned describe; ``not-serving`` — its registration says
exited/escalated, it refused, or the broker reports nothing subscribed on its rail;
``registered-silent`` — something holds its rail but nothing answered), the manager and delivery
planes through the §6.1 liveness probe (``bound`` / ``unbound`` / ``stale`` / ``unknown``; the
delivery verdict also reads the delivery lease, as ``assessDeliveryHealth`` does), and on a
user-auth mesh the auth service's exchange (``reachable`` or not). No stdout here: the CLI
prints (cotal_tui/cli/health.py), the console shows a segment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from meshview.errors import swallowed
from meshview.link.connect import ConnectTarget, caller_of
from meshview.wire import liveness as lw
from meshview.wire.endpoint import Caller
from meshview.wire.names import bucket_names, space_token

from attach.control.poller import RoundLoop
from attach.control.broker import MIN_VERSION, parse_version, server_version
from attach.control.registry import RegistryUnreadable, read_registry

PROBE_MS = 2000  # the liveness probe's deadline
DESCRIBE_MS = 3000  # a manager's pinned describe
MANAGERS_MAX = 64  # instances probed per run (a registry flood is cut, and said)
PENDING_MSGS = 8  # a reply subscription holds at most this many (a flood of replies is dropped)
PENDING_BYTES = 16 * 1024

# the reference's exit disposition (status.ts COMPONENT_EXIT): the worst component decides
EXIT = {"serving": 0, "absent": 1, "not-serving": 2, "refused": 3}


def exit_code(verdicts: list["Verdict"]) -> int:
    """0 all serving; else the worst of 1 absent, 2 present but not serving, 3 refused."""
    return max((EXIT[v.disposition] for v in verdicts), default=0)


HEALTHY = {"broker": "ok", "manager": "serving", "plane": "bound", "auth-exchange": "reachable"}


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class Verdict:
    """One component's verdict. ``source`` names where the deciding fact came from
    (``responder-roundtrip``, ``broker-no-responders``, ``lease-kv``, ``registry-kv``,
    ``broker-dial``, ``http-roundtrip``, ``none``); ``age_ms`` is how old that evidence was when
    observed (None: it could not be established — never 0)."""

    component: str  # broker | manager | manager-plane | delivery-plane | auth-exchange
    name: str  # what it is (the server, an instance id, the plane)
    state: str
    source: str
    age_ms: int | None
    detail: str
    observed_at: int = field(default_factory=_now_ms)
    facts: dict[str, Any] = field(default_factory=dict)
    rejected: str | None = None  # a named rejection of what a peer sent, when that decided it
    absent: bool = False  # nothing of the component exists at all (no responder and no record)

    @property
    def healthy(self) -> bool:
        kind = "plane" if self.component.endswith("-plane") else self.component
        return self.state == HEALTHY.get(kind)

    @property
    def disposition(self) -> str:
        """The reference's component verdict (status.ts ``ComponentVerdict``): ``serving``,
        ``absent``, ``not-serving`` (present, not serving) or ``refused`` (not establishable)."""
        if self.healthy:
            return "serving"
        if self.state == "unknown":
            return "refused"
        return "absent" if self.absent else "not-serving"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"component": self.component, "name": self.name, "state": self.state,
                               "verdict": self.disposition, "healthy": self.healthy, "source": self.source, "ageMs": self.age_ms,
                               "observedAt": self.observed_at, "detail": self.detail}
        if self.facts:
            out["facts"] = self.facts
        if self.rejected:
            out["rejected"] = self.rejected
        return out


def age_text(ms: int | None) -> str:
    """An age for an operator; an unknown one says so (never interpolated as a number)."""
    if ms is None:
        return "age unknown"
    if ms < 1000:
        return f"{ms}ms"
    s = ms / 1000
    return f"{s:.1f}s" if s < 60 else f"{int(s // 60)}m{int(s % 60):02d}s"


# ---- the liveness probe (§6.1) ---------------------------------------------------------------


@dataclass(frozen=True)
class Probed:
    responder: str
    outcome: str
    rtt_ms: int
    instance: str | None = None
    rejected: str | None = None
    why: str = ""


def _asker(nc: Any) -> tuple[str, str]:
    bound = caller_of(nc)
    if bound:
        return bound[0], bound[1]
    c = Caller.fresh()
    return c.owner, c.actor


async def probe_plane(nc: Any, space: str, plane: str, *, timeout_ms: int = PROBE_MS) -> Probed:
    """Ask ``live.<plane>`` once and grade how the ask ended (meshview.wire.liveness)."""
    owner, actor = _asker(nc)
    subject = lw.probe_subject(space, plane, owner, actor)
    reply = lw.reply_subject(subject)
    started = time.monotonic()

    def rtt() -> int:
        return int((time.monotonic() - started) * 1000)

    try:
        sub = await nc.subscribe(reply, pending_msgs_limit=PENDING_MSGS, pending_bytes_limit=PENDING_BYTES)
    except Exception as e:  # noqa: BLE001 - a denied subscribe: about our credential, not the plane
        return Probed("unknown", "refused", rtt(), why=f"the reply subscription was refused ({type(e).__name__})")
    try:
        started = time.monotonic()
        await nc.publish(subject, b"", reply=reply)  # no flush: a cancelled flush breaks nats-py
        msg = await sub.next_msg(timeout=timeout_ms / 1000)
    except (asyncio.TimeoutError, TimeoutError):
        return Probed("unknown", "timeout", rtt(), why=f"no answer within {timeout_ms}ms (something may be "
                      "subscribed and wedged)")
    except Exception as e:  # noqa: BLE001 - the transport failed: not a verdict about the plane
        return Probed("unknown", "refused", rtt(), why=f"the probe could not run ({type(e).__name__})")
    finally:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - a closed link: the subscription is gone anyway [counted: COTAL_LOG]
            swallowed("attach.control.health:probe_plane")
    took = rtt()
    if msg.headers and msg.headers.get("Status") == "503":
        return Probed(lw.responder_from_probe("noResponders"), "noResponders", took,
                      why="the broker reports no responder subscribed")
    try:
        state, instance = lw.parse_answer(msg.data, plane)
    except lw.LivenessRejected as e:
        return Probed(lw.responder_from_probe("malformed"), "malformed", took, rejected=e.code, why=str(e))
    return Probed(lw.responder_from_probe("replied", state), "replied", took, instance=instance,
                  why=f"the responder graded itself {state}")


async def _read_lease(nc: Any, space: str) -> tuple[str, int, bool] | None:
    """The delivery lease, or None when there is none; raises on a denied or failed read."""
    from nats.js.errors import BucketNotFoundError, KeyNotFoundError, NotFoundError

    try:
        kv = await nc.jetstream().key_value(bucket_names(space).delivery)
        entry = await kv.get(lw.LEASE_KEY)
    except (KeyNotFoundError, BucketNotFoundError, NotFoundError):
        return None
    if not entry.value:
        return None
    return lw.delivery_lease(entry.value)


async def delivery_verdict(nc: Any, space: str, *, timeout_ms: int = PROBE_MS) -> Verdict:
    """The delivery plane: the lease first (it can only refuse or decorate), then the probe."""
    lease: tuple[str, int, bool] | None = None
    lease_problem: tuple[str, str] | None = None  # (code, sentence)
    try:
        lease = await _read_lease(nc, space)
    except lw.LivenessRejected as e:
        lease_problem = (e.code, str(e))
    except Exception as e:  # noqa: BLE001 - a denied read is named, never an absence
        lease_problem = ("lease:refused", f"the delivery lease could not be read ({type(e).__name__})")
    seen = _now_ms()
    facts: dict[str, Any] = {}
    hb_age: int | None = None
    if lease is not None:
        holder, since, ready = lease
        hb_age = seen - since if seen >= since else None
        facts = {"leaseHolder": holder, "leaseReady": ready, "lastHeartbeatAgeMs": hb_age,
                 "lastHeartbeatSource": "lease-kv"}
        if seen < since:
            facts["clockSkewMs"] = since - seen
    p = await probe_plane(nc, space, "delivery", timeout_ms=timeout_ms)
    facts["probe"] = p.outcome
    facts["respondedInMs"] = p.rtt_ms
    if p.instance:
        facts["instance"] = p.instance
    hb = f"; last lease heartbeat {age_text(hb_age)} old" if lease is not None else ""

    def v(state: str, source: str, age: int | None, detail: str, rejected: str | None = None) -> Verdict:
        return Verdict("delivery-plane", "delivery", state, source, age, detail, facts=facts, rejected=rejected)

    if p.outcome == "noResponders":
        return dataclasses.replace(v("unbound", "broker-no-responders", 0, f"nothing answers the delivery liveness "
                                     f"probe{hb}"), absent=lease is None and lease_problem is None)
    if p.outcome != "replied":
        return v("unknown", "none", None, f"{p.why}{hb}", p.rejected)
    if p.responder != "bound":
        return v(p.responder, "responder-roundtrip", 0, f"{p.why}{hb}")
    # it answered bound: only a ready, fresh lease may back that (health.ts order)
    if lease_problem is not None:
        return v("unknown", "lease-kv", None, f"a responder answered bound, but {lease_problem[1]}", lease_problem[0])
    if lease is None:
        return v("unknown", "lease-kv", None, "a responder answered bound, but no delivery lease backs it "
                 "(no daemon holds the shard): not taken as health", "liveness:unbacked")
    if hb_age is None:
        return v("unknown", "lease-kv", None, f"the lease heartbeat is stamped {facts['clockSkewMs']}ms in the "
                 "future, so its age cannot be established", "lease:clock-fault")
    if not lease[2]:
        return v("unbound", "lease-kv", hb_age, f"a responder answered bound, but its lease is not ready{hb}",
                 "liveness:unbacked")
    if hb_age > lw.LEASE_TTL_MS:
        return v("stale", "lease-kv", hb_age, f"the lease heartbeat is older than its {lw.LEASE_TTL_MS}ms TTL{hb}")
    return v("bound", "responder-roundtrip", 0, f"answered in {p.rtt_ms}ms{hb}")


async def manager_plane_verdict(nc: Any, space: str, *, timeout_ms: int = PROBE_MS) -> Verdict:
    p = await probe_plane(nc, space, "manager", timeout_ms=timeout_ms)
    facts: dict[str, Any] = {"probe": p.outcome, "respondedInMs": p.rtt_ms}
    if p.instance:
        facts["instance"] = p.instance
    if p.outcome == "noResponders":
        return Verdict("manager-plane", "manager", "unbound", "broker-no-responders", 0,
                       "nothing answers the manager liveness probe", facts=facts, absent=True)
    if p.outcome != "replied":
        return Verdict("manager-plane", "manager", "unknown", "none", None, p.why, facts=facts, rejected=p.rejected)
    return Verdict("manager-plane", "manager", p.responder, "responder-roundtrip", 0,
                   f"{p.why}, in {p.rtt_ms}ms", facts=facts)


# ---- the broker and the managers -------------------------------------------------------------


def _info_jetstream(nc: Any) -> bool | None:
    """The server INFO's own ``jetstream`` flag (what the broker told this connection), if held."""
    info = getattr(nc, "_server_info", None)  # nats-py keeps the INFO here; no public accessor
    v = info.get("jetstream") if isinstance(info, dict) else None
    return v if isinstance(v, bool) else None


async def broker_verdict(nc: Any, target: ConnectTarget) -> Verdict:
    from nats.errors import NoRespondersError

    started = time.monotonic()
    version = server_version(nc)
    v = parse_version(version)
    schedules = v is not None and v >= MIN_VERSION
    js: bool | None = _info_jetstream(nc)
    why = "the server INFO says JetStream is off" if js is False else ""
    if js is None:
        try:
            await asyncio.wait_for(nc.jetstream().account_info(), PROBE_MS / 1000)
            js = True
        except NoRespondersError:
            js, why = False, "nothing answers the JetStream API"
        except Exception as e:  # noqa: BLE001 - a denial or a timeout says nothing about JetStream
            why = f"JetStream could not be asked with this credential ({type(e).__name__})"
    took = int((time.monotonic() - started) * 1000)
    facts = {"version": version, "jetstream": js, "messageSchedules": schedules, "respondedInMs": took}
    if js is None:
        state, detail = "unknown", why
    elif not js:
        state, detail = "no-jetstream", why
    elif not schedules:
        state, detail = "too-old", (f"nats-server {version or 'of unknown version'}: the control plane needs "
                                    f"{'.'.join(map(str, MIN_VERSION[:2]))} (message schedules)")
    else:
        state, detail = "ok", f"nats-server {version}, JetStream on, message schedules"
    return Verdict("broker", target.display, state, "broker-dial", 0, detail, facts=facts)


async def _user_manager_verdicts(nc: Any, space: str, describe_ms: int) -> list[Verdict]:
    """A user mesh: the one pinned manager, asked ``ps`` on its ``inst`` rail (a user bearer reads
    no registry and sends no scatter)."""
    from attach.control.verbs import ControlError, _user_ps

    started = time.monotonic()
    try:
        res = await _user_ps(nc, space, describe_ms)
    except ControlError as e:
        return [Verdict("manager", "pinned", "unknown", "none", None, f"the pinned manager could not be asked ({e})")]
    out = []
    for r in res.managers:
        took = int((time.monotonic() - started) * 1000)
        if r.state == "answered":
            out.append(Verdict("manager", r.instance_id, "serving", "responder-roundtrip", 0,
                               f"the pinned manager answered ps in {took}ms", facts={"respondedInMs": took}))
        elif r.state == "refused":
            out.append(Verdict("manager", r.instance_id, "not-serving", "responder-roundtrip", 0,
                               f"the pinned manager refused ps ({r.code})"))
        else:
            out.append(Verdict("manager", r.instance_id, "registered-silent", "none", None,
                               f"the pinned manager did not answer ps within {describe_ms}ms"))
    return out


def _collect(t: asyncio.Future) -> None:
    """Retrieve a finished side probe's outcome (so an unused failure is not reported as lost)."""
    if not t.cancelled():
        t.exception()


async def manager_verdicts(nc: Any, space: str, *, describe_ms: int = DESCRIBE_MS) -> list[Verdict]:
    """One verdict per registered manager instance (a spec in the records), probed in parallel."""
    from attach.control.endpoint import EndpointClient
    from attach.control.verbs import CLIENT_NAME, _user_nc, probe

    if _user_nc(nc):
        return await _user_manager_verdicts(nc, space, describe_ms)
    try:
        regs = await read_registry(nc, space)
    except RegistryUnreadable as e:
        return [Verdict("manager", "registry", "unknown", "registry-kv", None,
                        f"the manager registry could not be read ({e})")]
    registered = sorted((r for r in regs.values() if r.spec), key=lambda r: r.instance_id)[:MANAGERS_MAX]

    async def one(r: Any) -> Verdict:
        iid = r.instance_id
        facts: dict[str, Any] = {"registrationState": r.state, "epoch": r.epoch, "lease": r.lease}
        if r.skip_reason in ("exited", "escalated", "never-converged", "behind"):
            return Verdict("manager", iid, "not-serving", "registry-kv", None,
                           f"registered, but its registration reads {r.skip_reason}", facts=facts)
        started = time.monotonic()
        rail = asyncio.ensure_future(probe(nc, space, iid))
        asked = asyncio.ensure_future(EndpointClient(nc, space, name=CLIENT_NAME).describe(
            instance_id=iid, deadline_ms=describe_ms))
        # neither is cancelled: nats-py's read loop breaks on a flush cancelled mid-way, so the
        # loser runs out its own bounded deadline, its outcome collected and dropped
        for t in (rail, asked):
            t.add_done_callback(_collect)
        await asyncio.wait({rail, asked}, return_when=asyncio.FIRST_COMPLETED)
        if not asked.done() and rail.exception() is None and rail.result() == "gone":
            return Verdict("manager", iid, "not-serving", "broker-no-responders", 0,
                           "registered, but the broker reports nothing subscribed on its rail", facts=facts)
        await asyncio.wait({asked})
        e = asked.exception()
        if e is not None:
            code = getattr(e, "code", type(e).__name__)
            if code == "deadline-exceeded":
                return Verdict("manager", iid, "registered-silent", "none", None,
                               f"registered and its rail is held, but no answer to a pinned describe within "
                               f"{describe_ms}ms", facts=facts)
            return Verdict("manager", iid, "not-serving", "responder-roundtrip", 0,
                           f"it refused a pinned describe ({code})", facts=facts)
        facts["respondedInMs"] = int((time.monotonic() - started) * 1000)
        facts["epoch"] = asked.result().epoch
        return Verdict("manager", iid, "serving", "responder-roundtrip", 0,
                       f"answered a pinned describe in {facts['respondedInMs']}ms", facts=facts)

    out = list(await asyncio.gather(*(one(r) for r in registered)))
    cut = sum(1 for r in regs.values() if r.spec) - len(registered)
    if cut > 0:
        out.append(Verdict("manager", f"+{cut}", "unknown", "none", None,
                           f"{cut} more registered instances were not probed (at most {MANAGERS_MAX})"))
    return out


async def auth_verdict(target: ConnectTarget) -> Verdict | None:
    """The auth service's exchange on a user-auth mesh: one real exchange (the CLI's baseline
    view), timed; None when the mesh has no exchange."""
    if not target.can_exchange or not target.exchange_url or not target.idp_token_file:
        return None
    from meshview.link.exchange import ExchangeError, exchange, read_idp_token

    started = time.monotonic()
    try:
        await exchange(target.exchange_url, read_idp_token(target.idp_token_file), timeout=PROBE_MS / 1000 * 2)
    except ExchangeError as e:
        return Verdict("auth-exchange", target.exchange_url, "unreachable", "http-roundtrip", None, str(e))
    except Exception as e:  # noqa: BLE001 - said, never a traceback
        return Verdict("auth-exchange", target.exchange_url, "unreachable", "none", None,
                       f"the exchange could not be asked ({type(e).__name__})")
    took = int((time.monotonic() - started) * 1000)
    return Verdict("auth-exchange", target.exchange_url, "reachable", "http-roundtrip", 0,
                   f"issued a bearer in {took}ms", facts={"respondedInMs": took})


async def components(nc: Any, target: ConnectTarget, *, probe_ms: int = PROBE_MS,
                     describe_ms: int = DESCRIBE_MS, managers: bool = True,
                     space: str | None = None) -> list[Verdict]:
    """Every component's verdict, the probes run side by side (``space``: other than the
    target's)."""
    space = space_token(space or target.space)
    jobs: list[Any] = [broker_verdict(nc, target), manager_plane_verdict(nc, space, timeout_ms=probe_ms),
                       delivery_verdict(nc, space, timeout_ms=probe_ms)]
    if managers:
        jobs.append(manager_verdicts(nc, space, describe_ms=describe_ms))
    jobs.append(auth_verdict(target))
    got = await asyncio.gather(*jobs)
    out: list[Verdict] = [got[0]]
    if managers:
        out.extend(got[3])
    out.extend([got[1], got[2]])
    if got[-1] is not None:
        out.append(got[-1])
    return out


# ---- the console's opt-in segment -----------------------------------------------------------

HEALTH_PERIOD_S = 15.0
SHORT = {"broker": "broker", "manager": "mgr", "manager-plane": "manager", "delivery-plane": "delivery",
         "auth-exchange": "auth"}


class HealthPoller(RoundLoop):
    """The console's health probe, made ONLY when the operator opted in (``cotal watch --health``
    or ``[ui] health = true``): every :data:`HEALTH_PERIOD_S` the broker, the two planes and the
    exchange, one round at a time (bounded: a round's probes end by their own deadlines), on the
    session's connection, never blocking the loop. The managers are the ps poller's to show."""

    task_name = "health"

    def __init__(self, nc: Any, target: ConnectTarget, space: str, *, period: float = HEALTH_PERIOD_S,
                 probe_ms: int = PROBE_MS) -> None:
        self._init_loop()
        self.nc, self.target, self.space = nc, target, space
        self.period, self.probe_ms = period, probe_ms
        self.verdicts: list[Verdict] = []
        self.rounds = 0
        self.last_error: str | None = None

    async def poll_once(self) -> None:
        self.verdicts = await components(self.nc, self.target, probe_ms=self.probe_ms, managers=False,
                                         space=self.space)
        self.rounds += 1
        self.last_error = None

    def note(self) -> tuple[str, bool]:
        """``(text, healthy)`` for the status bar: what is not healthy, by name, else all well."""
        if self.last_error and not self.verdicts:
            return "health unread", False
        if not self.verdicts:
            return "health …", True
        bad = [v for v in self.verdicts if not v.healthy]
        if not bad:
            return "♥ healthy", True
        shown = ", ".join(f"{SHORT.get(v.component, v.component)} {v.state}" for v in bad[:2])
        return "✗ " + shown + (f" +{len(bad) - 2}" if len(bad) > 2 else ""), False
