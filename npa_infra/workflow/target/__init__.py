"""The stack and cluster a run targets: its settings, the checks that bind a submit
to them, and where its secrets come from. The bottom of ``workflow``: planning,
execution and the commands all read it, and it reads none of them."""
