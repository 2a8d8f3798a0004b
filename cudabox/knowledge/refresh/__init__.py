"""`cudabox matrix refresh`: read PyPI, plan changes per subject (frameworks, cuDNN, CUDA), write overlay files."""
