"""The operator's Kubernetes side: manifest rendering, kopf handlers, and small in-pod helpers."""
