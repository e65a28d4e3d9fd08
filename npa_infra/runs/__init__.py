"""Pure decisions about runs: the launch transaction, its classifier, resume and cancel.

Nothing here does I/O, reads the environment or the clock: time and
observations are parameters, so every rule can be tested exhaustively.
"""
