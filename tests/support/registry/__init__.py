"""A real OCI registry on loopback for image-preflight tests (registry.md §5).

Debian's ``docker-registry`` (CNCF distribution 2.8.2) runs as a subprocess
on a free port of 127.0.0.1 with a generated config; the token issuer, the
test PKI and a fault proxy run in the test process. Install the tools with
``make registry-tools`` (``apt-get install -y docker-registry apache2-utils
openssl``); ``$NPA_TEST_DOCKER_REGISTRY`` overrides the binary. Without them
the fixtures fail with that command; they never skip.

Fixtures (``plugin.py``, registered for the whole suite by ``pytest_plugins`` in
``tests/conftest.py``):

- ``registry_plain``: mode A, ``http://``, no auth;
- ``registry_token``: mode B, ``https://`` (test CA), token auth; issuer on
  ``https://127.0.0.1:<p>/token?account=npa-test`` (the registry's own host),
  ``x5c`` tokens;
- ``registry_token_kid``: the same with libtrust ``kid`` tokens;
- ``registry_foreign_realm``: mode B, realm ``https://localhost:<p>/token``
  (another host than the registry's ``127.0.0.1``);
- ``registry_hostile_realm``: mode B, realm ``http://localhost:<p>/token``
  (plain HTTP, another host); tokens it issues are valid;
- ``registry_htpasswd``: mode C, ``http://``, bcrypt htpasswd, ``Basic
  realm="npa-test-basic"``; ``legacy``/``legacypw`` is an ``$apr1$`` entry
  (always 401);
- ``fault_proxy``: factory, ``fault_proxy(registry) -> faults.FaultProxy``, a
  recording proxy in front of the real registry (``base_url``, ``host``,
  ``other_url``, ``downgrade_url``, ``requests``) with ``rate_limit()`` (429
  + ``Retry-After``), ``redirect(target="other"|"downgrade")``,
  ``mismatch_digest(how="header"|"body")``, ``respond()``, ``drop()``,
  ``delay()``, ``add(Fault)``, ``clear()``;
- ``registry_pki``: the session ``Pki`` (``ca_path``, ``server_cert_path``,
  ``server_key_path``, ``signer``, ``rogue``).

Each registry fixture is a ``server.Registry``:

- ``mode`` (``plain``/``token``/``htpasswd``), ``host`` (``127.0.0.1:<port>``),
  ``port``, ``scheme``, ``base_url``, ``ca_path`` (None over plain HTTP),
  ``service`` and ``realm`` (token mode), ``basic_realm`` (htpasswd mode),
  ``users`` (``{"alice": "alicepw", "bob": "bobpw"}``), ``process``
  (``config_path``, ``log_path``, ``startup_seconds``);
- ``ref(repo, tag=None, digest=None)`` -> ``127.0.0.1:<port>/repo:tag@digest``;
- ``ssl_context()``, ``client(**httpx_kwargs)`` (an ``httpx.Client`` on
  ``base_url`` trusting the test CA);
- ``push(repo, tag="latest", *, kind="oci-index", platforms=("linux/amd64",),
  labels=None) -> push.PushedImage`` (``digest``, ``body``, ``media_type``,
  ``children``, ``child("linux/amd64")`` with ``digest``, ``body``,
  ``config``, ``layers``); kinds ``oci-index``, ``docker-list``,
  ``oci-manifest``, ``docker-manifest``; ``push.BOOTSTRAP_LABEL`` is the
  bootstrap-contract label pair;
- ``admin_headers(repo)``: alice's authority, minted in-process (not recorded);
- ``issuer`` (token mode): ``requests`` (``IssuerRequest``: ``method``,
  ``path``, ``query``, ``params``, ``authorization``, ``scheme``, ``host``,
  ``status``, ``subject``, ``granted``), ``switches`` (``IssuerSwitches``),
  ``url``, ``realm``, ``mint()``; reset before every test.

Access (token mode): alice pull+push ``team/*``; bob pull ``team/app``;
everyone, anonymous included, pull ``public/*``; nobody the catalog.

Example::

    def test_pull(registry_token):
        image = registry_token.push("team/app", "v1")
        ...  # run the product against registry_token.ref("team/app", "v1")
        assert all(r.authorization is None for r in registry_token.issuer.requests)
"""
