"""The ``orkeon`` command."""
