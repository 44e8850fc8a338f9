"""The broker's sockets: size-prefixed frames, the server side of a connection, and the one client transport
for broker-to-broker calls (Raft, replica fetches, requests to the active controller).

Above the sans-io protocol package and below everything that talks to another node: the controller's quorum
and the replication fetcher use these, never the client-facing server's internals.
"""
