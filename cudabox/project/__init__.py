"""The project's own files: cudabox.yaml (spec), what `cudabox init` detects and writes. First stage after the matrix."""
