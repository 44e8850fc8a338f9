"""Security: TLS contexts, SASL exchanges, SCRAM credentials, principals and Kafka's ACL model.

Pure pieces below the network layer: the server wires them to listeners and requests.
"""
