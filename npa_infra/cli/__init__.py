"""Thin typer commands: parse, call the SDK, print, exit."""
