"""The Kubernetes adapter: the only code that talks to a Kubernetes API server.

It reads the first kubeconfig file exactly as pinned SkyPilot sees it, talks
to one exact context through the official client (imported lazily), and
returns our own typed records, never client objects (kubernetes.md).
"""
