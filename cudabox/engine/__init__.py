"""The one door to the container engine (Docker's API and CLI), and the parser for its build output."""
