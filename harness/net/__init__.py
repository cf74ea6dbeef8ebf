"""Networking for the harness: loopback ports, partition shapes, a built-in Toxiproxy server."""
