"""Record and replay: the model's inputs to a file, checkpoints, markers, seat terminals, tools."""
