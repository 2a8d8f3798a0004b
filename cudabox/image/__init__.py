"""From lock to validated image: render the Dockerfile, build it, validate it with the smoke test; the images/ catalog."""
