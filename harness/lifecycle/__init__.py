"""What makes sure nothing the harness starts outlives it: the ledger and its watchdog (the
reaper), one way to be interrupted, and what /proc says about a process.

Below every package that starts something (net, disk, cluster), so each registers what it made
here — with how to undo it — and this package imports none of them."""
