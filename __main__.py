"""The Pulumi program of project npa-infra, as the Pulumi CLI runs it.

``pulumi preview -s dev`` (or ``up``, ``destroy``) in this directory runs this
file with the stack's config from ``stacks/Pulumi.<stack>.yaml``; ``npa stack …``
runs the very same program through the Automation API. See
``npa_infra/stack/program.py``.
"""

from npa_infra.stack import program

program.main()
