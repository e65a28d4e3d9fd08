"""The stack: the infrastructure a run needs, declared with Pulumi (pulumi.md, cli.md §6).

- ``config``: the stack configuration file, typed and validated with located errors;
- ``program`` and ``providers``: the Pulumi program (namespaces, pull Secrets,
  ServiceAccount and RBAC, the staged source prefix, the SkyPilot controller);
- ``runner``: the Automation API driver (``StackRunner``) behind ``base.StackEngine``,
  with the one translation of engine failures into ``NpaError``s;
- ``report``: engine events into the ``npa.stack.preview.v1`` diff and its markdown;
- ``gate``: the terminal-run gate every teardown passes first;
- ``api``: the SDK functions ``npa stack …`` wraps.

Nothing here is imported by ``npa --help``: ``pulumi`` loads only inside the
functions that drive it (style.md rule 6). The package sits below
``workflow`` and above ``journal`` in the import-linter layers.
"""
