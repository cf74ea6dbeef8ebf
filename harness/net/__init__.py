"""Networking for the harness: loopback ports, partition shapes, Toxiproxy wiring."""
