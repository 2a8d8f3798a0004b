"""The catalog's CI: the GitHub workflow and bake matrix (workflow), and building every catalog image (build)."""
