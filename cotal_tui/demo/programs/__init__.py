"""Small real programs the demo manager runs on its seats' ptys."""
