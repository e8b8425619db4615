"""A randomized fault campaign against the LVM driver (see docs/testing.md, "Fault campaign").

Many processes and threads drive one volume group through the driver's API
while an operator works out of band, the simulator injects every fault it
knows and the holder of the admission lock is SIGKILLed; the invariants are
checked from LVM's own state. ``python -m tests.campaign --help``.
"""
