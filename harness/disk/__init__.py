"""Disk faults: a size-limited log dir per broker that can be filled, and one whose reads and
writes can fail with EIO (docs/disk-faults.md)."""
