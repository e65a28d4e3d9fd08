"""The commands on runs that exist: ``workflow status``, ``workflow cancel`` and the
stack teardown that cancels its runs first. They read the journal and act by exact id."""
