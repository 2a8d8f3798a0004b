"""Running the project's image: locally (run, exec, ps, logs), on Slurm, on Kubernetes, across a fleet; doctor."""
