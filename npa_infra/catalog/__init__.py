"""The tool catalog: built-in tools, image pins, and loading a catalog file."""
