"""The operator acting on the mesh: the participant that sends, and what a send means."""
