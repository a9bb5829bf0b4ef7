"""kilocard's container images (the runner and the node agent) as OCI image layouts, built from
Debian's packages and the kilocard wheel with no container runtime: `python -m images build`.
A build tool of the repository, beside bench/: the toolkit never imports it, the wheel does not
ship it."""
