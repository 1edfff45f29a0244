"""One attach session: the caller, the rails, and the serving host."""
