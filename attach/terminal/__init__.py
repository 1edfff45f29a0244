"""Terminal state and bytes: the headless mirror, scrollback, key codes, the output filter."""
