"""meshplan's user interfaces: the command line (cli) and, later, the HTTP API."""
