"""npa's own files on the local disk: private, serialized, atomic, and marked as npa's.

Below every command that writes under the npa home or a SkyPilot state
directory (import-linter: beside ``npa_infra.config``, above the pure core):

- ``privatefile``: directories 0700 and files 0600 whatever the umask; every
  read-merge-write of one of npa's files under a lock of its own, written
  whole to a private temporary file, fsynced and renamed into place (issue 24:
  concurrent ``npa configure`` runs lost each other's updates);
- ``marker``: the file npa leaves in each directory it creates for its caches,
  the proof ``npa cleanup --yes`` needs before it removes one (issue 24:
  cleanup removed directories npa never made).

Callers import the module they need; the package imports nothing.
"""
