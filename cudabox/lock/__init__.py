"""A project resolved and written down: spec + host + matrix -> Stack -> cudabox.lock (and init's first lock)."""
