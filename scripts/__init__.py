"""Command-line entry points and tooling around the ctxstore service."""
