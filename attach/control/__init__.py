"""The §13 endpoint plane: calls and scatters, the registry, the verbs, managers, seats, runs."""
