"""cudabox: one isolated, validated CUDA stack per project, in a container."""

__version__ = "0.1.0"
