"""A stand-in world for demos and tests: a local broker, space provisioning and auth trust, a
scripted team, a pty manager serving managed seats and the ``programs/`` it runs in them.

May import meshview and attach (it speaks the same wire and serves the same rails) and itself;
never the console. Only ``cotal_tui/cli/demo.py``, tests and benches import it.
"""
