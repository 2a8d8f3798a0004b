"""`python -m cudabox`: the same entry point as the `cudabox` console script."""

import sys

from .entry import main

if __name__ == "__main__":
    sys.exit(main())
