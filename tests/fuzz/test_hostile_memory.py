"""The memory bound under a hostile peer, fast: ``bench/hostile_memory.py`` at 120 MB per phase
(the bench's figure is at 1 GB). The console's observer + model, in a child process, take
megabyte names, roles, ids, junk-laden ag-ui frames, 28k-part envelopes and oversized presence
cards under fresh keys, and end no bigger than after the same bytes of plain text."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from cotal_tui.demo.broker import Broker

BENCH = Path(__file__).resolve().parents[2] / "bench" / "hostile_memory.py"


def _bench():
    spec = importlib.util.spec_from_file_location("hostile_memory", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_hostile_traffic_costs_no_more_memory_than_plain_text():
    bench = _bench()
    b = Broker(name="cotal-hostile-mem-test").start()
    try:
        plain = bench.run_phase(b.url, "mplain", "plain", 120, quiet=True)
        hostile = bench.run_phase(b.url, "mhostile", "hostile", 120, quiet=True)
    finally:
        b.stop()
    print(f"\nplain {plain['peak']:.0f} MB peak, hostile {hostile['peak']:.0f} MB peak, "
          f"{hostile['cuts']} cuts")
    assert hostile["dropped"] == 0 and hostile["rows"] >= 100
    assert hostile["cuts"] > 0
    # 120 MB of hostile fields would be ~90 MB more kept whole: the bounds keep it level
    assert hostile["peak"] < plain["peak"] + 25, (plain, hostile)
