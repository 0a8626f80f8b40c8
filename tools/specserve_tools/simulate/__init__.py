"""`specserve simulate`: the switching policy replayed on a trace against simple baselines and the offline
optimum, on a fluid model of the pools that serves like the emulator's profiles (no I/O, no wall clock)."""
