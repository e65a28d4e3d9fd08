"""Projects: a local alias for the target of the operator's commands (issue 16).

A project names what ``-p/--project ALIAS`` selects: a stack
(``stacks/Pulumi.<NAME>.yaml``), or a context, namespace and SkyPilot state
directory, stored in ``$NPA_HOME/projects/<alias>.yaml`` (``store``). A stack
is its own project until a project entry binds the alias. ``resolve`` decides,
purely, what a command's ``--stack``/``--project`` pair selects; ``selection``
gathers what that decision reads. ``models`` holds the records.

This module imports nothing: the option help below is read by the CLI and by
``workflow.submission.submitflags`` while ``npa --help`` builds, which must stay fast.
"""

__all__ = ["PROJECT_HELP", "STACK_HELP"]

STACK_HELP = "Stack: stacks/Pulumi.<NAME>.yaml, as in Pulumi."
PROJECT_HELP = (
    "Project ALIAS: its entry in $NPA_HOME/projects/ (a stack, or a context, namespace and "
    "SkyPilot state directory), else the stack of that name."
)
