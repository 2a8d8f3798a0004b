"""What cudabox knows, as data: the matrix (model, field readers, overlays, loader, checks, reports) and its refresh from PyPI. Imports no later stage."""
