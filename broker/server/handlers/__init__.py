"""One module per API family; each exposes handler functions registered in ``kafkette.broker.server.apis``."""
