"""Subcommands of the `specserve` CLI; each is a thin shell around a library module."""
