"""The model as lines: the --plain/--json printer, its non-blocking sink and notifications."""
