"""hive-lab under JupyterHub: one scheduler as a Hub-managed service, clients in the users' servers.

- ``identity``: the service's identity (the caller's Hub token -> Hub user, groups, ``custom:hive-lab:*``
  scopes) and its authorizer (only hive-lab's API; terminals, kernels, contents... refused).
- ``service_app``: ``python -m hive_lab_server.hub.service_app``, the command the Hub runs for the
  service (a Jupyter server hosting only hive-lab at ``/services/hive-lab/``).
- ``client_mode`` and ``forward``: a user's single-user server in client mode starts no scheduler; its
  ``hive_lab/api/`` forwards to the service with the server's ``JUPYTERHUB_API_TOKEN`` (the owner's
  identity), so the Lab panel, magics, CLI, client and the ``hive`` kernel provisioner work unchanged.

See docs/jupyterhub.md and ``hive-lab hub-config``.
"""

SERVICE_NAME = "hive-lab"
ADMIN_SCOPE = "custom:hive-lab:admin"
