"""The execution of one attempt: its launch transaction, its task file, the adapters
it runs on, and the checks a relaunch must pass. What a live run is handed and
returns (``liverun``) lives here so that supervision and the commands above share
it without importing each other."""
